// capture: the probe plan, the capture file (safetensors + manifest) writer/reader, and the
// `capture` stage that runs a workload through an engine into a capture file.
// File format: docs/capture-format.md.
//
// The stage's interface: every part, by concern. Users include this header; a file of the capture
// folder itself may include the part it needs.
#pragma once

#include "capture/capture_file.h"  // CaptureWriter, CaptureReader, StoreDtype
#include "capture/capture_run.h"   // ProbePlan, CaptureRequest, RunCapture, RunLoadFloor, ReplayOf
#include "capture/manifest.h"      // CaptureManifest
#include "capture/pairing.h"       // CheckSameWorkload, PairProbes, Flips, FirstFlips, ForkWhere
