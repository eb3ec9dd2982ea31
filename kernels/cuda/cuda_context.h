// What every CUDA kernel of kt needs beside its own code: the step's indices on
// the device, one scratch workspace per GPU, the GPU's multiprocessor count,
// and a check after each launch. Plain C++ (no CUDA types), so factories and
// tests include it freely.
//
// The step (kern::Step) lives in host memory and is the same for every call of
// a forward(); kernels that need positions, slots, token ids or output rows on
// the device get them from upload_step(), which copies them once per step and
// queue (from pinned memory, asynchronously, in queue order) and hands every
// later call of the step the same device copy.
//
// The workspace is shared by all calls on one device: calls on one queue run
// in order, so a call may use all of it while it runs (work a call forks to
// the side queue has a workspace of its own). Factories reserve what
// they need at bind (reserve_workspace grows it, with a one-line error when the
// GPU cannot provide it); run() then finds it allocated. kt's executor gives
// each GPU one queue; two queues running calls of one device at once would
// have to share nothing (tests use one queue).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/kernel.h"

namespace kt::cuda {

struct DeviceStep {
  const int32_t* tokens = nullptr;   // [n_tokens] (zeros when the step has none)
  const int32_t* pos = nullptr;      // [n_tokens]
  const int32_t* slot = nullptr;     // [n_tokens]
  const int32_t* outputs = nullptr;  // [n_outputs]
  int64_t n_tokens = 0;
  int64_t n_outputs = 0;
  int32_t max_pos = 0;  // the largest position of the step (host-side)
};

// The step's indices on the current device, valid for work issued on `queue`
// after this call.
DeviceStep upload_step(const kern::Step& s, void* queue);

// Grows device `device`'s workspace to at least `bytes`. False (and *error)
// when the GPU cannot provide it. queue 1: the side queue's own workspace
// (side_queue below), for the work calls run there.
bool reserve_workspace(int device, uint64_t bytes, std::string* error, int queue = 0);
// The workspace of `device` (reserve_workspace ran at bind).
void* workspace(int device, int queue = 0);
uint64_t workspace_bytes(int device, int queue = 0);

// A second queue of `device` for work a call runs beside its own (the shared
// experts beside the routed ones, cuda_moe.cu): created once, at bind (not
// while a queue is being recorded); the call forks to it and joins back with
// events, so it is part of any recording of the call. Null (and *error) when
// it cannot be created. Work there uses the side queue's workspace
// (workspace(device, 1)), never the device queue's.
void* side_queue(int device, std::string* error);

// Streaming multiprocessors of `device` (132 on an H100 SXM).
int sm_count(int device);

// After a launch: a failed launch is a bug in kt (shapes were checked at
// bind), so it prints one line naming the kernel and the CUDA error and aborts.
// With KT_CUDA_SYNC=1 in the environment it also waits for the queue, so an
// error inside the kernel is reported at the call that caused it.
void check_launch(const char* what, void* queue);

// Whether kernels launch with programmatic dependent launch (cuda_launch.cuh):
// true unless KT_CUDA_PDL=0 in the environment (read once).
bool pdl_enabled();
// Whether one token's int8 matrix-vector products stage their weight rows in
// shared memory (cuda_matmul.cu); KT_CUDA_STAGE=0 turns it off, for measuring.
bool stage_enabled();
// Sets it for the launches that follow (tests compare both ways bit for bit).
void set_stage_enabled(bool on);

// Makes `device` current for the calling thread (cheap when it already is).
void use_device(int device);

// "cudaErrorMemoryAllocation (out of memory)".
std::string error_text(int cuda_error);

}  // namespace kt::cuda
