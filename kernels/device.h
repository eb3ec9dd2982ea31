// A device's memory, queues and copies, behind the smallest interface the
// runtime needs (IREE's HAL in miniature). The CPU needs none of it; the CUDA
// kernels library provides one ("cuda", kernels/cuda/cuda_device.cu) and the
// registry hands it out (find_device_api), so the runtime never includes a
// CUDA header and a CPU-only build simply has no "cuda" device.
//
// Errors: calls that can fail return false and set *error to one line.
// Queues are in-order (a CUDA stream); copies and kernels on one queue run in
// the order they were issued; events let the host wait for a point in a queue.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/kernel.h"

namespace kt::kern {

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;
  virtual std::string_view kind() const = 0;  // "cuda"
  // Devices present (0 without a driver or a GPU); their names ("NVIDIA H100 80GB HBM3").
  virtual int count() const = 0;
  virtual std::string name(int index) const = 0;
  virtual bool mem_info(int index, uint64_t* free_bytes, uint64_t* total_bytes) const = 0;

  // Device memory. alloc returns null and sets *error (with the bytes asked
  // and the bytes free) when the device cannot provide it.
  virtual void* alloc(int index, uint64_t bytes, std::string* error) = 0;
  virtual void free(int index, void* p) = 0;
  virtual bool memset_zero(int index, void* p, uint64_t bytes, std::string* error) = 0;

  // Host memory the device may copy to and from asynchronously (pinned).
  virtual bool pin(void* p, uint64_t bytes, std::string* error) = 0;
  virtual void unpin(void* p) = 0;

  virtual void* create_queue(int index, std::string* error) = 0;
  virtual void destroy_queue(int index, void* queue) = 0;
  // Blocks the host until everything issued on the queue has run.
  virtual bool sync(void* queue, std::string* error) = 0;
  // Asynchronous on the queue: host -> device, device -> host, device -> device
  // (also between devices). Synchronous (queue null): returns when done.
  virtual bool copy(void* dst, const void* src, uint64_t bytes, void* queue, std::string* error) = 0;

  // A point in a queue the host can wait for.
  virtual void* record_event(void* queue, std::string* error) = 0;
  virtual bool event_done(void* event) = 0;  // without blocking
  virtual bool wait_event(void* event, std::string* error) = 0;
  virtual void release_event(void* event) = 0;
  // Profiling: an event that keeps its time, and the GPU time between two
  // such events once both have run (milliseconds; negative on error).
  virtual void* record_timed_event(void* queue, std::string* error) = 0;
  virtual double elapsed_ms(void* from, void* to) = 0;

  // Recorded work (CUDA graphs): what a run of calls issues on a queue is
  // recorded once and replayed for later steps, one launch instead of one per
  // kernel. Replays reuse every pointer and launch shape of the recording, so
  // the runtime keys recordings on what those depend on: the step's shape,
  // Kernel::graph_key(), and prepare_step()'s token.
  //
  // prepare_step puts the step's indices on the device (what kernels read
  // positions, slots and tokens from) outside any recording, and returns a
  // token that changes whenever the device memory kernels read them, or their
  // scratch, from moves (0 and *error on failure). begin_capture returns false
  // (and *error) where recording is off or impossible (KT_CUDA_SYNC=1);
  // end_capture returns the replayable work, or null and *error when something
  // recorded cannot be replayed (the queue is then usable again).
  virtual uint64_t prepare_step(void* queue, const Step& step, std::string* error) = 0;
  virtual bool begin_capture(void* queue, std::string* error) = 0;
  virtual void* end_capture(void* queue, std::string* error) = 0;
  virtual bool launch_graph(void* graph, void* queue, std::string* error) = 0;
  virtual void release_graph(void* graph) = 0;

  // Host flags: 32-bit words in mapped host memory that a
  // queue waits on and writes, also inside recorded work, so GPU work issued
  // ahead of a CPU call starts the moment the host sets a word, and the host
  // learns that copies landed by reading one. alloc_flags returns n zeroed
  // words the device reaches, or null and *error where it cannot map them.
  virtual uint32_t* alloc_flags(int index, int n, std::string* error) = 0;
  virtual void free_flags(uint32_t* flags) = 0;
  // The queue waits until *flag == value, then sets *flag = 0.
  virtual bool wait_flag(void* queue, uint32_t* flag, uint32_t value, std::string* error) = 0;
  // *flag = value once the work issued before it on the queue has run, its
  // writes to host memory visible before the word.
  virtual bool write_flag(void* queue, uint32_t* flag, uint32_t value, std::string* error) = 0;
};

// The API of a device kind ("cuda"), or null when this build has none.
DeviceApi* find_device_api(std::string_view kind);

}  // namespace kt::kern
