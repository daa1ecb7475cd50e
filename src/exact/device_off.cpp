// A build without CUDA (FLIPSCOPE_CUDA=OFF): the exact engine runs on the CPU alone.
#include "exact/device.h"

namespace flipscope::exact {

bool BuiltWithCuda() { return false; }

Result<std::unique_ptr<DevicePass>> OpenDevice(const std::string& name, const Model&) {
  return Status::InvalidArgument(OptionName("device") + " " + name +
                                 ": this flipscope was built without CUDA (configure with -DFLIPSCOPE_CUDA=ON)");
}

}  // namespace flipscope::exact
