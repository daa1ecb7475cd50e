// engine: runs a model. Teacher-forced prefill that hands over logits rows at chosen positions,
// and (llama only) forking the sequence at a position to decode a greedy future.
//
// The stage's interface: every part, by concern. Users include this header; a file of the engine
// folder itself may include the part it needs.
#pragma once

#include "engine/engine_base.h"   // Engine, Row, Future, the build's facts
#include "engine/engine_record.h"  // EngineRecord: an engine's self-description, read once
#include "engine/http_engine.h"   // HttpOptions, HttpEngine, LlamaServerChoice, RedactUrl
#include "engine/knobs.h"         // Knobs, KnobTable(), FlashAttn, SplitMode, Repack, Replay
#include "engine/llama_engine.h"  // LlamaEngine, forks, TensorTap
#include "engine/load.h"          // FillerSource, FillerJob, PlanFillerJob, FillerCells
#include "engine/server.h"        // LaunchOptions, ServerProcess, FreePort
#include "runtime/runtime.h"
