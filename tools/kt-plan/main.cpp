// kt-plan: looks at plans without the compiler.
//   kt-plan info plan.ktp            what the plan holds: model, devices and their
//                                    memory, phases and their kernels
//   kt-plan json plan.ktp [-o F]     the plan as JSON (FlatBuffers' form of plan.fbs)
//   kt-plan pack plan.json -o F.ktp  JSON back to a plan (verified as kt-exec loads it;
//                                    --unchecked skips kt's checks: for tests that
//                                    need a plan of another version, say)
// Errors are one line on stderr and exit status 1.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/plan_json.h"
#include "runtime/plan_loader.h"

namespace {

int fail(const std::string& m) {
  std::fprintf(stderr, "kt-plan: %s\n", m.c_str());
  return 1;
}

bool write_file(const std::string& path, const void* data, size_t n) {
  if (path.empty() || path == "-") return std::fwrite(data, 1, n, stdout) == n;
  std::ofstream f(path, std::ios::binary);
  return f && f.write(static_cast<const char*>(data), std::streamsize(n));
}

std::string mib(uint64_t b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", double(b) / (1 << 20));
  return s;
}

int info(const kt::PlanFile& pf) {
  const kt::plan::Plan& p = pf.plan();
  std::printf("plan      %s (schema %u, %s)\n", pf.path().c_str(), p.schema_version(),
              p.producer() ? p.producer()->c_str() : "?");
  std::printf("gguf      %s (%llu bytes)\n", pf.gguf_path().c_str(), (unsigned long long)p.gguf()->size());
  std::printf("model     %s, %lld layers, vocabulary %lld, context %lld\n", p.model()->arch()->c_str(),
              (long long)p.model()->n_layer(), (long long)p.model()->n_vocab(), (long long)p.model()->n_ctx());
  std::printf("devices\n");
  for (const kt::plan::Device* d : *p.devices()) {
    const std::string name = d->kind() == kt::plan::DeviceKind::CUDA ? "cuda:" + std::to_string(d->index()) : "cpu";
    std::printf("  %-8s weights %12s  arena %10s  KV %8.1f KiB/token\n", name.c_str(), mib(d->weight_bytes()).c_str(),
                mib(d->arena_bytes()).c_str(), double(d->kv_bytes_per_token()) / 1024);
  }
  for (const kt::plan::Phase* ph : *p.phases()) {
    std::map<std::string, int> kernels;
    if (ph->calls())
      for (const kt::plan::Call* c : *ph->calls()) ++kernels[c->kernel()->str()];
    if (ph->min_tokens() > 0)
      std::printf("phase %s: %lld to %lld tokens per step, %u calls\n", ph->name()->c_str(), (long long)ph->min_tokens(),
                  (long long)ph->max_tokens(), ph->calls() ? ph->calls()->size() : 0);
    else
      std::printf("phase %s: up to %lld tokens per step, %u calls\n", ph->name()->c_str(), (long long)ph->max_tokens(),
                  ph->calls() ? ph->calls()->size() : 0);
    for (const auto& [k, n] : kernels) std::printf("  %-32s x%d\n", k.c_str(), n);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string out;
  bool unchecked = false;
  if (auto it = std::find(args.begin(), args.end(), "--unchecked"); it != args.end()) {
    unchecked = true;
    args.erase(it);
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == "-o" && i + 1 < args.size()) {
      out = args[i + 1];
      args.erase(args.begin() + long(i), args.begin() + long(i) + 2);
      break;
    }
  if (args.size() != 2) return fail("usage: kt-plan info|json PLAN.ktp [-o FILE] | kt-plan pack PLAN.json -o PLAN.ktp");
  const std::string& cmd = args[0];
  const std::string& path = args[1];
  if (cmd == "pack") {
    if (out.empty()) return fail("pack: give -o PLAN.ktp");
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(path + ": cannot read");
    const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto bytes = kt::plan_from_json(json, path);
    if (!bytes.ok()) return fail(bytes.error().message);
    // As kt-exec would load it: the same checks, before anything is written.
    if (!unchecked) {
      auto check = kt::PlanFile::from_bytes(path, *bytes);
      if (!check.ok()) return fail(check.error().message);
    }
    if (!write_file(out, bytes->data(), bytes->size())) return fail(out + ": cannot write");
    return 0;
  }
  auto pf = kt::PlanFile::load(path);
  if (!pf.ok()) return fail(pf.error().message);
  if (cmd == "info") return info(*pf);
  if (cmd == "json") {
    std::ifstream in(path, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto json = kt::plan_to_json(bytes, path);
    if (!json.ok()) return fail(json.error().message);
    if (!write_file(out, json->data(), json->size())) return fail(out + ": cannot write");
    return 0;
  }
  return fail("unknown command '" + cmd + "': info, json or pack");
}
