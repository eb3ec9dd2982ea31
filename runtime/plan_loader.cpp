#include "runtime/plan_loader.h"

#include <cstdint>
#include <filesystem>
#include <fstream>

namespace kt {

uint64_t gguf_fingerprint(const GgufFile& f) {
  uint64_t h = 1469598103934665603ull;
  const uint8_t* p = f.bytes();
  for (uint64_t i = 0; i < f.data_offset(); ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

Result<PlanFile> PlanFile::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return err(path, ": cannot open plan");
  const std::streamoff size = in.tellg();
  // A plan holds no weights: anything this large is not a plan.
  if (size < 0 || size > (std::streamoff(1) << 31)) return err(path, ": not a plan (", size, " bytes)");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) return err(path, ": cannot read plan");
  return from_bytes(path, std::move(bytes));
}

Result<PlanFile> PlanFile::from_bytes(std::string name, std::vector<uint8_t> bytes) {
  PlanFile p;
  p.path_ = std::move(name);
  p.bytes_ = std::move(bytes);
  KT_TRY(p.verify());
  return p;
}

namespace {

// FlatBuffers' verifier checks a vector's 4-byte length field, not that its
// 8-byte elements (long, double) are 8-byte aligned: a crafted plan could make
// every read of them misaligned (fuzz_plan found one). Plans kt-compile writes
// always are aligned; the bytes are held in a vector, aligned for any scalar.
template <class T>
bool aligned(const flatbuffers::Vector<T>* v) {
  return !v || reinterpret_cast<uintptr_t>(v->Data()) % alignof(T) == 0;
}

}  // namespace

Status PlanFile::verify() {
  const std::string& n = path_;
  // Plans are size-prefixed, so a truncated file is caught even where the
  // verifier alone would accept the bytes that remain.
  if (bytes_.size() < 12) return err(n, ": not a plan: ", bytes_.size(), " bytes is too short");
  if (!flatbuffers::BufferHasIdentifier(bytes_.data(), plan::PlanIdentifier(), /*size_prefixed=*/true))
    return err(n, ": not a kt plan (file identifier is not KTPL)");
  const uint32_t prefix = flatbuffers::ReadScalar<uint32_t>(bytes_.data());
  if (uint64_t(prefix) + 4 != bytes_.size())
    return err(n, ": truncated or padded plan: it says ", uint64_t(prefix) + 4, " bytes, the file has ", bytes_.size());
  flatbuffers::Verifier v(bytes_.data(), bytes_.size(), /*max_depth=*/64, /*max_tables=*/10'000'000);
  if (!plan::VerifySizePrefixedPlanBuffer(v)) return err(n, ": corrupt plan: the FlatBuffers verifier rejects it");
  plan_ = plan::GetSizePrefixedPlan(bytes_.data());
  const plan::Plan& pl = *plan_;
  if (pl.schema_version() != kPlanSchemaVersion)
    return err(n, ": plan schema version ", pl.schema_version(), ", this kt reads version ", kPlanSchemaVersion,
               ": recompile the plan with this kt-compile");
  if (!pl.gguf() || !pl.gguf()->path() || pl.gguf()->path()->size() == 0) return err(n, ": plan names no GGUF file");
  if (!pl.model()) return err(n, ": plan has no model section");
  const uint32_t n_dev = pl.devices() ? pl.devices()->size() : 0;
  const uint32_t n_buf = pl.buffers() ? pl.buffers()->size() : 0;
  const uint32_t n_w = pl.weights() ? pl.weights()->size() : 0;
  if (n_dev == 0) return err(n, ": plan has no devices");
  auto dev_ok = [&](int d) { return d >= 0 && uint32_t(d) < n_dev; };

  for (uint32_t i = 0; i < n_w; ++i) {
    const plan::Weight* w = pl.weights()->Get(i);
    const std::string what = "weight " + std::to_string(i);
    if (!w->tensor()) return err(n, ": ", what, " names no tensor");
    if (!dev_ok(w->device())) return err(n, ": ", what, " ('", printable(w->tensor()->string_view()), "'): device ", w->device(), " does not exist");
    if (!find_type(w->type())) return err(n, ": ", what, " ('", printable(w->tensor()->string_view()), "'): unknown type id ", w->type());
    if (!aligned(w->shape()) || !aligned(w->matrices()))
      return err(n, ": ", what, ": a misaligned list of 64-bit values (a damaged plan)");
    if (!w->shape() || w->shape()->size() < 1 || w->shape()->size() > 4)
      return err(n, ": ", what, " ('", printable(w->tensor()->string_view()), "'): shape must have 1 to 4 dimensions");
    for (int64_t d : *w->shape())
      if (d <= 0) return err(n, ": ", what, " ('", printable(w->tensor()->string_view()), "'): dimension ", d, " is not positive");
    if (w->matrices() && w->matrices()->size() > 0) {
      const int64_t n_mat = w->shape()->size() >= 3 ? w->shape()->Get(2) : 1;
      if (w->shape()->size() != 3)
        return err(n, ": ", what, " ('", printable(w->tensor()->string_view()), "'): a matrix subset needs a 3-D tensor");
      if (w->matrices()->size() > uint32_t(n_mat))
        return err(n, ": ", what, " ('", printable(w->tensor()->string_view()), "'): ", w->matrices()->size(),
                   " matrices selected of ", n_mat);
      for (int64_t m : *w->matrices())
        if (m < 0 || m >= n_mat)
          return err(n, ": ", what, " ('", printable(w->tensor()->string_view()), "'): matrix ", m, " is not in 0..",
                     n_mat - 1);
    }
  }
  for (uint32_t i = 0; i < n_buf; ++i) {
    const plan::Buffer* b = pl.buffers()->Get(i);
    const std::string what = "buffer " + std::to_string(i) + (b->name() ? " '" + printable(b->name()->string_view()) + "'" : "");
    if (!dev_ok(b->device())) return err(n, ": ", what, ": device ", b->device(), " does not exist");
    const TypeTraits* tt = find_type(b->type());
    const bool plain = tt && (tt->type == GgmlType::F32 || tt->type == GgmlType::F16 ||
                              tt->type == GgmlType::BF16 || tt->type == GgmlType::I32);
    if (!plain) return err(n, ": ", what, ": element type id ", b->type(), " is not F32, F16, BF16 or I32");
    if (b->row_elems() <= 0 || b->max_rows() <= 0) return err(n, ": ", what, ": empty shape");
    uint64_t bytes = 0, end = 0;
    if (__builtin_mul_overflow(uint64_t(b->row_elems()), uint64_t(b->max_rows()), &bytes) ||
        __builtin_mul_overflow(bytes, uint64_t(tt->type_size), &bytes) ||
        __builtin_add_overflow(b->offset(), bytes, &end) || end > pl.devices()->Get(uint32_t(b->device()))->arena_bytes())
      return err(n, ": ", what, ": [", b->offset(), ", +", bytes, ") lies outside its device's arena");
  }
  const uint32_t n_kv = pl.kv() ? pl.kv()->size() : 0;
  for (uint32_t i = 0; i < n_kv; ++i) {
    const plan::KvCache* c = pl.kv()->Get(i);
    const std::string what = "KV cache " + std::to_string(i) + " (layer " + std::to_string(c->layer()) + ")";
    if (!dev_ok(c->device())) return err(n, ": ", what, ": device ", c->device(), " does not exist");
    const TypeTraits* tt = find_type(c->type());
    if (!tt || !(tt->type == GgmlType::F32 || tt->type == GgmlType::F16 || tt->type == GgmlType::BF16))
      return err(n, ": ", what, ": element type id ", c->type(), " is not F32, F16 or BF16");
    if (c->k_cols() <= 0 || c->v_cols() <= 0 || c->k_cols() > (int64_t(1) << 24) || c->v_cols() > (int64_t(1) << 24) ||
        c->n_kv_heads() <= 0)
      return err(n, ": ", what, ": bad shape");
  }
  if (pl.model()->n_ctx() <= 0 || pl.model()->n_ctx() > (int64_t(1) << 24)) return err(n, ": model: bad n_ctx ", pl.model()->n_ctx());
  if (pl.model()->n_vocab() <= 0) return err(n, ": model: bad n_vocab ", pl.model()->n_vocab());
  if (!pl.phases() || pl.phases()->size() == 0) return err(n, ": plan has no phases");
  for (const plan::Phase* ph : *pl.phases()) {
    const std::string pname = ph->name() ? printable(ph->name()->string_view()) : "?";
    if (ph->max_tokens() <= 0 || ph->max_tokens() > (int64_t(1) << 20)) return err(n, ": phase ", pname, ": bad max_tokens ", ph->max_tokens());
    if (ph->logits() < 0 || uint32_t(ph->logits()) >= n_buf) return err(n, ": phase ", pname, ": logits buffer ", ph->logits(), " out of range");
    const bool prefill = pname == "prefill" || pname.rfind("prefill.", 0) == 0;
    if (ph->min_tokens() < 0 || ph->min_tokens() > ph->max_tokens() || (ph->min_tokens() > 0 && !prefill))
      return err(n, ": phase ", pname, ": bad min_tokens ", ph->min_tokens(), " (a prefill phase's, 0..max_tokens)");
    if (!ph->calls()) continue;
    for (uint32_t c = 0; c < ph->calls()->size(); ++c) {
      const plan::Call* call = ph->calls()->Get(c);
      const std::string what = pname + " call " + std::to_string(c) + (call->path() ? " (" + printable(call->path()->string_view()) + ")" : "");
      if (!call->kernel() || call->kernel()->size() == 0) return err(n, ": ", what, ": names no kernel");
      if (!dev_ok(call->device())) return err(n, ": ", what, ": device ", call->device(), " does not exist");
      for (auto* list : {call->inputs(), call->outputs()})
        if (list)
          for (int b : *list)
            if (b < 0 || uint32_t(b) >= n_buf) return err(n, ": ", what, ": buffer index ", b, " out of range (", n_buf, " buffers)");
      if (call->weights())
        for (int w : *call->weights())
          if (w < 0 || uint32_t(w) >= n_w) return err(n, ": ", what, ": weight index ", w, " out of range (", n_w, " weights)");
      if (call->kv() < -1 || (call->kv() >= 0 && uint32_t(call->kv()) >= n_kv))
        return err(n, ": ", what, ": KV cache index ", call->kv(), " out of range (", n_kv, " caches)");
      if (call->params())
        for (const plan::Param* p : *call->params()) {
          if (!p->key()) return err(n, ": ", what, ": a parameter has no key");
          if (!aligned(p->ints()) || !aligned(p->floats()))
            return err(n, ": ", what, ": parameter '", printable(p->key()->string_view()),
                       "': a misaligned list of 64-bit values (a damaged plan)");
        }
    }
  }
  return ok_status();
}

std::string PlanFile::gguf_path() const {
  const std::filesystem::path g(plan_->gguf()->path()->str());
  if (g.is_absolute()) return g.string();
  return (std::filesystem::path(path_).parent_path() / g).lexically_normal().string();
}

Status PlanFile::check_gguf(const GgufFile& f) const {
  const plan::GgufRef& ref = *plan_->gguf();
  if (f.file_size() != ref.size())
    return err(path_, ": ", f.path(), " has changed since the plan was compiled (", f.file_size(), " bytes, the plan expects ",
               ref.size(), "): recompile the plan");
  if (gguf_fingerprint(f) != ref.fingerprint())
    return err(path_, ": ", f.path(), " has changed since the plan was compiled (its header or tensor table differ): recompile the plan");
  return ok_status();
}

Status PlanFile::check_kernels(const std::function<bool(std::string_view)>& has_kernel) const {
  for (const plan::Phase* ph : *plan_->phases()) {
    if (!ph->calls()) continue;
    for (const plan::Call* call : *ph->calls())
      if (!has_kernel(call->kernel()->string_view()))
        return err(path_, ": kernel '", printable(call->kernel()->string_view()), "' (", ph->name() ? printable(ph->name()->string_view()) : "?",
                   call->path() ? ", " + printable(call->path()->string_view()) : std::string(), ") is not in this build");
  }
  return ok_status();
}

double plan_option_f(const plan::Plan& p, std::string_view key) {
  if (p.options())
    for (const plan::Param* o : *p.options())
      if (o->key() && o->key()->string_view() == key) return o->f();
  return 0;
}

}  // namespace kt
