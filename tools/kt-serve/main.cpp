// kt-serve: an OpenAI- and Ollama-compatible HTTP server with a web chat page,
// over the continuous-batching engine (runtime/engine.h). Loads the plan and
// the GGUF it names, starts the engine (its worker owns the executor), and
// answers on httplib's threads. SIGINT/SIGTERM stop it cleanly: running
// requests are cancelled and their connections closed. Links no MLIR.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <httplib.h>

#include "runtime/chat_template.h"
#include "runtime/engine.h"
#include "runtime/plan_loader.h"
#include "runtime/routing_profile.h"
#include "tools/kt-serve/http_server.h"
#include "tools/kt-serve/serve_context.h"
#include "tools/kt-serve/serve_options.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "kt-serve: %s\n", message.c_str());
  return 1;
}


}  // namespace

int main(int argc, char** argv) {
  kt::serve::ServeOptions o;
  bool help = false;
  if (const std::string e = kt::serve::parse_serve_args(argc, argv, o, &help); !e.empty()) return fail(e);
  if (help) {
    std::fputs(kt::serve::kServeUsage, stdout);
    return 0;
  }
  // A client that disconnects must not kill the server through SIGPIPE: the
  // write fails instead, and its request is cancelled.
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);  // before any thread starts

  kt::ExecOptions xo;
  xo.threads = o.threads;
  xo.n_ctx = o.ctx;
  xo.n_slots = o.parallel;
  auto ex = kt::Executor::load(o.plan, xo);
  if (!ex.ok()) return fail(ex.error().message);
  const std::string gguf_path = (*ex)->plan_file().gguf_path();

  std::string template_source, template_name;
  if (!o.chat_template_file.empty()) {
    std::ifstream in(o.chat_template_file, std::ios::binary);
    if (!in) return fail(o.chat_template_file + ": cannot read the chat template");
    std::ostringstream ss;
    ss << in.rdbuf();
    template_source = ss.str();
    template_name = o.chat_template_file;
  } else if ((*ex)->plan().chat_template()) {
    template_source = (*ex)->plan().chat_template()->str();
    template_name = gguf_path + ":tokenizer.chat_template";
  }
  std::optional<kt::ChatTemplate> chat_template;
  if (!template_source.empty()) {
    auto t = kt::ChatTemplate::parse(template_source, template_name);
    if (!t.ok()) return fail(t.error().message);
    chat_template.emplace(std::move(*t));
  }

  // --routing-profile-out: counted by the engine, written once it has stopped.
  kt::RoutingStats routing;
  const uint64_t fingerprint = kt::gguf_fingerprint((*ex)->gguf());
  const std::string arch((*ex)->gguf().architecture());
  kt::EngineOptions eo;
  eo.max_queue = o.queue;
  eo.prompt_cache = o.prompt_cache;
  if (!o.routing_profile_out.empty()) eo.routing = &routing;
  auto engine = kt::Engine::start(std::move(*ex), eo);
  if (!engine.ok()) return fail(engine.error().message);

  std::string name = o.model_name;
  if (name.empty()) name = std::filesystem::path(o.plan).stem().string();
  kt::serve::ServeContext ctx{(*engine).get(), (*engine)->tokenizer(), o, kt::serve::describe_model(**engine, gguf_path, name),
                              std::move(chat_template), template_source, {}};
  if (ctx.chat_template) {
    const kt::Tokenizer& tok = (*engine)->tokenizer();
    ctx.template_caps = kt::probe_chat_template(*ctx.chat_template, tok.bos() >= 0 ? tok.token_text(tok.bos()) : "",
                                                tok.eos() >= 0 ? tok.token_text(tok.eos()) : "");
    ctx.tool_format = kt::tool_call_format_for(template_source);
  }

  httplib::Server server;
  kt::serve::configure_server(server, ctx);
  const int port = kt::serve::bind_server(server, o.host, o.port);
  if (port < 0) return fail("cannot listen on " + o.host + ":" + std::to_string(o.port));
  std::printf("kt-serve: listening on http://%s:%d (model %s, %d slots of %lld tokens, %d threads%s%s)\n",
              o.host.c_str(), port, name.c_str(), (*engine)->n_slots(), (long long)(*engine)->n_ctx(),
              (*engine)->n_threads(), ctx.chat_template ? "" : ", no chat template",
              o.api_key.empty() ? "" : ", API key required");
  std::fflush(stdout);

  // SIGINT and SIGTERM are blocked in every thread, so only this one takes
  // them (sigwait), and stops the server from an ordinary thread, where that
  // is safe.
  std::atomic<bool> listening{true};
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (!listening) return;
    std::fprintf(stderr, "kt-serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    server.stop();
  });
  const bool ok = server.listen_after_bind();
  listening = false;
  pthread_kill(signals.native_handle(), SIGTERM);  // wakes it if listen ended on its own
  signals.join();
  if (!o.routing_profile_out.empty()) {
    engine->reset();  // the worker stops: the counts are final
    const kt::RoutingProfile p = kt::routing_profile_from(routing, fingerprint, arch, 0);
    if (auto st = kt::write_routing_profile(o.routing_profile_out, p); !st.ok()) return fail(st.error().message);
    std::fprintf(stderr, "kt-serve: wrote the routing profile %s (%zu MoE layers)\n", o.routing_profile_out.c_str(),
                 p.layers.size());
  }
  return ok ? 0 : fail("the server stopped on an error");
}
