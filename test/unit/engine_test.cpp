// The continuous-batching engine (runtime/engine.h), without HTTP: greedy and
// seeded output of a request alone equals its output among 16 others (and
// again when the prompts come from the slots' caches), cancellation frees the
// slot, the queue bound refuses, prompts longer than the context and bad
// tokens are refused, stop strings and token budgets end the text.
//
// Plans come from kt-compile (KT_COMPILE_BIN, set by test/serve/CMakeLists.txt
// when the compiler is built); without it (the runtime-only builds) the tests
// skip.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/prompt.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A compiled plan per model, in a directory removed when the process ends.
class Plans {
 public:
  static Plans& get() {
    static Plans p;
    return p;
  }
  ~Plans() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  // "" when there is no kt-compile (the reason is in why()).
  std::string plan(const std::string& model) {
#ifndef KT_COMPILE_BIN
    why_ = "built without the compiler (no kt-compile to make plans)";
    return "";
#else
    if (dir_.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "kt-engine-test-XXXXXX").string();
      if (!mkdtemp(tmpl.data())) {
        why_ = "mkdtemp failed";
        return "";
      }
      dir_ = tmpl;
    }
    const fs::path out = dir_ / (model + ".ktp");
    if (!fs::exists(out)) {
      const std::string cmd = std::string(KT_COMPILE_BIN) + " " + KT_TEST_DATA_DIR + "/" + model +
                              ".gguf --gpu-mem 0 --ctx 512 -o " + out.string() + " >/dev/null";
      if (std::system(cmd.c_str()) != 0 || !fs::exists(out)) {
        why_ = "kt-compile failed: " + cmd;
        return "";
      }
    }
    return out.string();
#endif
  }
  const std::string& why() const { return why_; }

 private:
  fs::path dir_;
  std::string why_;
};

std::unique_ptr<kt::Engine> start_engine(const std::string& plan, int slots, kt::EngineOptions eo = {},
                                         int64_t n_ctx = 0) {
  kt::ExecOptions xo;
  xo.n_slots = slots;
  xo.n_ctx = n_ctx;
  auto ex = kt::Executor::load(plan, xo);
  EXPECT_TRUE(ex.ok()) << (ex.ok() ? "" : ex.error().message);
  if (!ex.ok()) return nullptr;
  auto e = kt::Engine::start(std::move(*ex), eo);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(*e) : nullptr;
}

// What one request's callback saw.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::string text;
  int events = 0;
  int32_t tokens_in_events = 0;
  bool done = false;
  kt::EngineEvent last;
  // Runs on the worker thread, with the request's cancellation flag.
  std::function<void(const kt::EngineEvent&, std::atomic<bool>&)> hook;
  std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);

  void on_event(kt::EngineEvent&& e) {
    if (hook) hook(e, *cancel);
    std::lock_guard<std::mutex> lock(mu);
    ++events;
    text += e.text;
    tokens_in_events += e.n_tokens;
    if (e.done) {
      done = true;
      last = std::move(e);
    }
    cv.notify_all();
  }
  bool wait(std::chrono::seconds timeout = 120s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return done; });
  }
};

struct Submitted {
  std::shared_ptr<Collector> c = std::make_shared<Collector>();
  std::shared_ptr<std::atomic<bool>> cancel = c->cancel;
  std::optional<kt::Rejection> rejected;
};

Submitted submit(kt::Engine& e, std::vector<int32_t> prompt, const kt::GenerationParams& gp,
                 std::function<void(const kt::EngineEvent&, std::atomic<bool>&)> hook = {}) {
  Submitted s;
  s.c->hook = std::move(hook);
  kt::EngineRequest r;
  r.prompt = std::move(prompt);
  r.params = gp;
  r.on_event = [c = s.c](kt::EngineEvent&& ev) { c->on_event(std::move(ev)); };
  r.cancel = s.cancel;
  s.rejected = e.submit(std::move(r));
  return s;
}

kt::GenerationParams greedy(int64_t max_tokens) {
  kt::GenerationParams gp;
  gp.sampling.temperature = 0;
  gp.max_tokens = max_tokens;
  gp.ignore_eos = true;  // random weights: keep every request the length asked
  return gp;
}

std::vector<int32_t> prompt_tokens(const kt::Engine& e, int i) {
  std::string text = "Request " + std::to_string(i) + ":";
  for (int k = 0; k < i % 7; ++k) text += " once upon a time there was a little engine";
  return kt::tokenize_prompt(e.tokenizer(), text, false);
}

struct Case {
  std::vector<int32_t> prompt;
  kt::GenerationParams params;
};

// 17 requests of different prompt lengths and budgets; every third samples
// with a seed at temperature 0.8 (its own sampler must not see the others).
std::vector<Case> cases(const kt::Engine& e) {
  std::vector<Case> cs;
  for (int i = 0; i < 17; ++i) {
    Case c{prompt_tokens(e, i), greedy(8 + (i * 5) % 33)};
    if (i % 3 == 2) {
      c.params.sampling.temperature = 0.8f;
      c.params.sampling.seed = 1000 + uint64_t(i);
    }
    cs.push_back(std::move(c));
  }
  return cs;
}

class EngineModel : public ::testing::TestWithParam<const char*> {};

TEST_P(EngineModel, OutputAloneEqualsOutputAmongSixteen) {
  const std::string plan = Plans::get().plan(GetParam());
  if (plan.empty()) GTEST_SKIP() << Plans::get().why();

  kt::EngineOptions no_cache;
  no_cache.prompt_cache = false;
  auto alone_engine = start_engine(plan, 1, no_cache);
  ASSERT_TRUE(alone_engine);
  const std::vector<Case> cs = cases(*alone_engine);
  std::vector<std::vector<int32_t>> alone;
  for (const Case& c : cs) {
    Submitted s = submit(*alone_engine, c.prompt, c.params);
    ASSERT_FALSE(s.rejected) << s.rejected->message;
    ASSERT_TRUE(s.c->wait());
    ASSERT_EQ(s.c->last.finish, kt::FinishReason::Length) << s.c->last.error;
    ASSERT_EQ(int64_t(s.c->last.output_tokens.size()), c.params.max_tokens);
    alone.push_back(s.c->last.output_tokens);
  }
  alone_engine.reset();

  // 16 slots for 17 requests: the last waits and joins while others decode.
  // The second round finds every prompt in some slot's cache.
  auto engine = start_engine(plan, 16);
  ASSERT_TRUE(engine);
  for (int round = 0; round < 2; ++round) {
    std::vector<Submitted> subs;
    for (const Case& c : cs) {
      subs.push_back(submit(*engine, c.prompt, c.params));
      ASSERT_FALSE(subs.back().rejected) << subs.back().rejected->message;
    }
    int fully_cached = 0;
    for (size_t i = 0; i < subs.size(); ++i) {
      ASSERT_TRUE(subs[i].c->wait());
      const kt::EngineEvent& done = subs[i].c->last;
      EXPECT_EQ(done.finish, kt::FinishReason::Length) << done.error;
      EXPECT_EQ(done.output_tokens, alone[i]) << "request " << i << ", round " << round;
      EXPECT_EQ(subs[i].c->tokens_in_events, done.completion_tokens);
      fully_cached += done.cached_tokens == int64_t(cs[i].prompt.size()) - 1;
    }
    // Round 1: 17 prompts went through 16 slots, so the 17th evicted one.
    // Had all 17 reached the scheduler in one batch, the other 15 of the
    // first 16 would each find their own prompt cached; but requests are
    // admitted in the batches the scheduler finds, and the one whose cache
    // is gone takes the least recently used free slot, which may hold the
    // prompt of a request still to come, which then does the same (13 of 17
    // under a loaded machine, 2 runs in ~12). Most still hit: the cache and
    // the admission by cached prefix work; the exact count is timing.
    if (round == 1) {
      EXPECT_GE(fully_cached, 9);
    }
  }
  const kt::EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.requests_finished[int(kt::FinishReason::Length)], 34u);
  EXPECT_EQ(m.slots_active, 0);
  EXPECT_GT(m.decode_step_tokens, m.decode_steps);  // decode steps were shared
}

INSTANTIATE_TEST_SUITE_P(Models, EngineModel, ::testing::Values("tiny-dsv3-F32", "tiny-qwen2moe-F32"));

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plan_ = Plans::get().plan("tiny-dsv3-F32");
    if (plan_.empty()) GTEST_SKIP() << Plans::get().why();
  }
  std::string plan_;
};

TEST_F(EngineTest, CancellationFreesTheSlotAtOnce) {
  auto engine = start_engine(plan_, 1);
  ASSERT_TRUE(engine);
  kt::GenerationParams endless = greedy(-1);  // until the context is full
  // A cancels itself on its first event; B waits for the only slot.
  Submitted a = submit(*engine, prompt_tokens(*engine, 1), endless,
                       [](const kt::EngineEvent&, std::atomic<bool>& cancel) { cancel = true; });
  ASSERT_FALSE(a.rejected);
  Submitted b = submit(*engine, prompt_tokens(*engine, 2), greedy(5));
  ASSERT_FALSE(b.rejected);
  ASSERT_TRUE(a.c->wait());
  ASSERT_TRUE(b.c->wait());
  EXPECT_EQ(a.c->last.finish, kt::FinishReason::Cancelled);
  EXPECT_LT(a.c->last.completion_tokens, 100);  // stopped within a step or two, not at the context's end
  EXPECT_EQ(b.c->last.finish, kt::FinishReason::Length);
  EXPECT_EQ(b.c->last.completion_tokens, 5);
  EXPECT_EQ(engine->metrics().slots_active, 0);
}

TEST_F(EngineTest, CancelledWhileQueuedNeverRuns) {
  auto engine = start_engine(plan_, 1);
  ASSERT_TRUE(engine);
  std::mutex gate;
  std::unique_lock<std::mutex> hold(gate);
  // The running request's first event blocks the worker until the others are queued.
  Submitted a = submit(*engine, prompt_tokens(*engine, 1), greedy(3), [&](const kt::EngineEvent&, std::atomic<bool>&) {
    std::lock_guard<std::mutex> wait_for_test(gate);
  });
  ASSERT_FALSE(a.rejected);
  Submitted b = submit(*engine, prompt_tokens(*engine, 2), greedy(3));
  ASSERT_FALSE(b.rejected);
  *b.cancel = true;
  hold.unlock();
  ASSERT_TRUE(a.c->wait());
  ASSERT_TRUE(b.c->wait());
  EXPECT_EQ(a.c->last.finish, kt::FinishReason::Length);
  EXPECT_EQ(b.c->last.finish, kt::FinishReason::Cancelled);
  EXPECT_EQ(b.c->last.completion_tokens, 0);
}

TEST_F(EngineTest, QueueBoundRefuses) {
  kt::EngineOptions eo;
  eo.max_queue = 2;
  auto engine = start_engine(plan_, 1, eo);
  ASSERT_TRUE(engine);
  std::mutex gate;
  std::unique_lock<std::mutex> hold(gate);
  std::atomic<bool> running{false};
  // A holds the only slot: its first event blocks the worker until the test lets go.
  Submitted a = submit(*engine, prompt_tokens(*engine, 1), greedy(50), [&](const kt::EngineEvent&, std::atomic<bool>&) {
    running = true;
    std::lock_guard<std::mutex> wait_for_test(gate);
  });
  ASSERT_FALSE(a.rejected);
  while (!running) std::this_thread::sleep_for(1ms);
  Submitted b = submit(*engine, prompt_tokens(*engine, 2), greedy(3));
  Submitted c = submit(*engine, prompt_tokens(*engine, 3), greedy(3));
  Submitted d = submit(*engine, prompt_tokens(*engine, 4), greedy(3));
  EXPECT_FALSE(b.rejected);
  EXPECT_FALSE(c.rejected);
  ASSERT_TRUE(d.rejected);
  EXPECT_EQ(d.rejected->reason, kt::Rejection::Reason::QueueFull);
  EXPECT_EQ(engine->metrics().queue_length, 2);
  *a.cancel = true;
  hold.unlock();
  for (Submitted* s : {&a, &b, &c}) ASSERT_TRUE(s->c->wait());
  EXPECT_EQ(a.c->last.finish, kt::FinishReason::Cancelled);
  EXPECT_EQ(b.c->last.finish, kt::FinishReason::Length);
  EXPECT_EQ(c.c->last.finish, kt::FinishReason::Length);
  const kt::EngineMetrics m = engine->metrics();
  EXPECT_EQ(m.requests_rejected_queue_full, 1u);
  EXPECT_EQ(m.queue_length, 0);
}

TEST_F(EngineTest, PromptMustFitTheContext) {
  auto engine = start_engine(plan_, 1, {}, /*n_ctx=*/64);
  ASSERT_TRUE(engine);
  std::vector<int32_t> prompt(64, 100);
  Submitted too_long = submit(*engine, prompt, greedy(-1));
  ASSERT_TRUE(too_long.rejected);
  EXPECT_EQ(too_long.rejected->reason, kt::Rejection::Reason::PromptTooLong);
  // 63 tokens fit: the first token comes from the prompt's logits, the second
  // from the last free position; then the context is full.
  prompt.pop_back();
  Submitted fits = submit(*engine, prompt, greedy(-1));
  ASSERT_FALSE(fits.rejected);
  ASSERT_TRUE(fits.c->wait());
  EXPECT_EQ(fits.c->last.finish, kt::FinishReason::Length);
  EXPECT_EQ(fits.c->last.completion_tokens, 2);
}

TEST_F(EngineTest, BadPromptsAreRefused) {
  auto engine = start_engine(plan_, 1);
  ASSERT_TRUE(engine);
  Submitted empty = submit(*engine, {}, greedy(3));
  ASSERT_TRUE(empty.rejected);
  EXPECT_EQ(empty.rejected->reason, kt::Rejection::Reason::InvalidPrompt);
  for (int32_t bad : {int32_t(-1), int32_t(engine->n_vocab())}) {
    Submitted s = submit(*engine, {1, bad}, greedy(3));
    ASSERT_TRUE(s.rejected);
    EXPECT_EQ(s.rejected->reason, kt::Rejection::Reason::InvalidPrompt) << s.rejected->message;
  }
  EXPECT_EQ(engine->metrics().requests_rejected_invalid, 3u);
}

TEST_F(EngineTest, StopStringsAndBudgetsEndTheText) {
  auto engine = start_engine(plan_, 2);
  ASSERT_TRUE(engine);
  const std::vector<int32_t> prompt = prompt_tokens(*engine, 3);
  Submitted full = submit(*engine, prompt, greedy(40));
  ASSERT_TRUE(full.c->wait());
  const std::string text = full.c->text;
  ASSERT_EQ(full.c->last.finish, kt::FinishReason::Length);
  EXPECT_EQ(full.c->last.completion_tokens, 40);
  ASSERT_GE(text.size(), 12u) << text;

  // A stop string from the middle of the text: the text ends before its first occurrence.
  const std::string stop = text.substr(text.size() / 2, 3);
  const size_t at = text.find(stop);
  kt::GenerationParams gp = greedy(40);
  gp.stop = {"never appears \x01", stop};
  Submitted stopped = submit(*engine, prompt, gp);
  ASSERT_TRUE(stopped.c->wait());
  EXPECT_EQ(stopped.c->last.finish, kt::FinishReason::Stop);
  EXPECT_EQ(stopped.c->text, text.substr(0, at));
  EXPECT_LT(stopped.c->last.completion_tokens, 40);

  // max_tokens 0: the prompt runs, nothing is generated.
  Submitted none = submit(*engine, prompt, greedy(0));
  ASSERT_TRUE(none.c->wait());
  EXPECT_EQ(none.c->last.finish, kt::FinishReason::Length);
  EXPECT_EQ(none.c->last.completion_tokens, 0);
  EXPECT_EQ(none.c->text, "");
}

TEST_F(EngineTest, StoppingTheEngineEndsEverything) {
  auto engine = start_engine(plan_, 1);
  ASSERT_TRUE(engine);
  Submitted a = submit(*engine, prompt_tokens(*engine, 1), greedy(-1));
  Submitted b = submit(*engine, prompt_tokens(*engine, 2), greedy(-1));
  ASSERT_FALSE(a.rejected);
  ASSERT_FALSE(b.rejected);
  engine.reset();
  ASSERT_TRUE(a.c->wait(1s));
  ASSERT_TRUE(b.c->wait(1s));
  EXPECT_EQ(b.c->last.finish, kt::FinishReason::Cancelled);
}

}  // namespace
