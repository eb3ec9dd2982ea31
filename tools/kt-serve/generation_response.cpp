#include "tools/kt-serve/generation_response.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace kt::serve {

namespace {

// Events from the engine's worker to the handler's thread. The worker only
// pushes (EngineRequest::on_event must not block); the handler waits.
class EventChannel {
 public:
  void push(EngineEvent&& e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_one();
  }
  // Waits up to timeout for events and takes them all.
  std::vector<EngineEvent> take(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
    std::vector<EngineEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
  }

  const std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<EngineEvent> events_;
};

constexpr std::chrono::milliseconds kWakeEvery{100};

}  // namespace

ApiError rejection_error(const Rejection& r) {
  switch (r.reason) {
    case Rejection::Reason::QueueFull:
    case Rejection::Reason::Stopped:
      return overloaded(r.message);
    case Rejection::Reason::PromptTooLong:
      return bad_request(r.message, "messages", "context_length_exceeded");
    case Rejection::Reason::InvalidPrompt:
      break;
  }
  return bad_request(r.message, "prompt");
}

std::optional<Rejection> respond_with_generation(httplib::Response& res, Engine& engine, EngineRequest request,
                                                 std::unique_ptr<ResponseFormat> format) {
  auto channel = std::make_shared<EventChannel>();
  request.cancel = channel->cancel;
  request.on_event = [channel](EngineEvent&& e) { channel->push(std::move(e)); };
  if (auto rejected = engine.submit(std::move(request))) return rejected;

  std::shared_ptr<ResponseFormat> fmt(std::move(format));
  const char* content_type = fmt->content_type();
  auto started = std::make_shared<bool>(false);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies must not hold back a stream
  res.set_chunked_content_provider(
      content_type,
      [channel, fmt, started](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& bytes) { return bytes.empty() || sink.write(bytes.data(), bytes.size()); };
        if (!*started) {
          *started = true;
          if (!write(fmt->start())) {
            channel->cancel->store(true);
            return false;
          }
        }
        for (const EngineEvent& e : channel->take(kWakeEvery)) {
          if (!write(fmt->on_event(e))) {
            channel->cancel->store(true);
            return false;
          }
          if (e.done) {
            sink.done();
            return true;
          }
        }
        return true;  // nothing yet: httplib checks the connection and calls again
      },
      // Called when the response ends; not successful: the client went away
      // (or the server is stopping) before the last event.
      [channel](bool success) {
        if (!success) channel->cancel->store(true);
      });
  return std::nullopt;
}

}  // namespace kt::serve
