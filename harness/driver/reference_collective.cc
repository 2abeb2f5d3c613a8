// The reference collective: one fixed library call timed around every repetition of a
// program that asks for it, so that results taken minutes apart (a sweep, then the steps
// priced from it) can say whether the host ran at the same speed for both. A virtual machine's
// cores can move under it: on a 2-core guest here a 1 MiB all-reduce between two ranks took
// 0.12 ms or 0.5 ms for seconds at a time (docs/measurements.md).
#include "harness/comm/traffic.h"
#include "harness/core/clock.h"
#include "harness/driver/driver.h"

namespace zb {

Status Driver::time_reference(int calls, std::vector<double>* times) {
  const size_t count = kReferenceBytes / dtype_size(DType::f32);
  if (!reference_buffer_.data()) {
    ZB_RETURN_IF_ERROR(Buffer::allocate(comm_->mem_kind(), kReferenceBytes, &reference_buffer_));
    ZB_RETURN_IF_ERROR(zero_bytes(reference_buffer_.data(), reference_buffer_.kind(), kReferenceBytes));
  }
  // The library call has no timeout of its own: every rank is known to have come this far
  // first, through the control plane's bounded barrier.
  ZB_RETURN_IF_ERROR(comm_->synchronize());
  ZB_RETURN_IF_ERROR(control_->barrier(Wait::barrier, "the reference collective"));
  void* data = reference_buffer_.data();
  for (int i = -1; i < calls; ++i) {
    const double t0 = now_seconds();
    ZB_RETURN_IF_ERROR(comm_->bare(Coll::all_reduce, data, data, count, DType::f32));
    ZB_RETURN_IF_ERROR(comm_->bare_synchronize());
    if (i >= 0) times->push_back(now_seconds() - t0);
  }
  return Status::ok();
}

}  // namespace zb
