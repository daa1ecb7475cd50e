// checkpoint: facts about model files (`info`, model_info.h), tensor-by-tensor diffs
// (`tensors`, tensors.h) and `doctor` (doctor.h). Include the feature's header; this one is the
// whole stage.
#pragma once

#include "checkpoint/doctor.h"
#include "checkpoint/model_info.h"
#include "checkpoint/tensors.h"
