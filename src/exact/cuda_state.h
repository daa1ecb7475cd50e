// What cuda_device.cu keeps for the kernels of cuda_ops.cu: the stream they are queued on and the
// first error since the last Sync. Not an interface (cuda_ops.h is); included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace flipscope::exact::cuda::detail {

// The stream of the kernels, Upload, Download and Copy (created by Open).
cudaStream_t Stream();
// Records `what` as the first failed operation, unless one is recorded since the last Sync.
void NoteError(const std::string& what);

}  // namespace flipscope::exact::cuda::detail
