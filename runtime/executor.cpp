#include "runtime/executor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <utility>

#include "kernels/cpu/matmul_i8.h"
#include "kernels/device.h"
#include "kernels/registry.h"
#include "runtime/executor_impl.h"
#include "runtime/thread_pool.h"

namespace kt {

namespace {

std::string device_name(const plan::Device& d) {
  return d.kind() == plan::DeviceKind::CUDA ? "cuda:" + std::to_string(d.index()) : "cpu";
}

std::vector<kern::Param> read_params(const plan::Call& c) {
  std::vector<kern::Param> out;
  if (!c.params()) return out;
  for (const plan::Param* p : *c.params()) {
    kern::Param q;
    q.key = p->key()->str();
    q.i = p->i();
    q.f = p->f();
    if (p->s()) q.s = p->s()->str();
    if (p->ints()) q.ints.assign(p->ints()->begin(), p->ints()->end());
    if (p->floats()) q.floats.assign(p->floats()->begin(), p->floats()->end());
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace

Batch Batch::sequence(std::span<const int32_t> tokens, int32_t pos0, int32_t slot, bool all_logits) {
  Batch b;
  const int32_t n = int32_t(tokens.size());
  b.tokens.assign(tokens.begin(), tokens.end());
  for (int32_t i = 0; i < n; ++i) {
    b.pos.push_back(pos0 + i);
    b.slot.push_back(slot);
    if (all_logits || i == n - 1) b.outputs.push_back(i);
  }
  return b;
}


void Executor::Impl::populate_cpu_weights() {
  const plan::Plan& pl = plan.plan();
  if (!pl.weights()) return;
  std::vector<std::pair<const uint8_t*, uint64_t>> ranges;
  for (uint32_t i = 0; i < pl.weights()->size(); ++i)
    if (!devices[size_t(pl.weights()->Get(i)->device())]->api) {
      const GgufTensor* t = gguf.tensor(pl.weights()->Get(i)->tensor()->string_view());
      if (t) ranges.emplace_back(t->data, t->nbytes);
    }
  const long page = sysconf(_SC_PAGESIZE);
  pool->for_range(int64_t(ranges.size()), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const auto [p, n] = ranges[size_t(i)];
      auto* lo = reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t(page - 1));
#ifdef MADV_POPULATE_READ
      if (madvise(lo, size_t(p + n - lo), MADV_POPULATE_READ) == 0) continue;
#endif
      volatile uint8_t sink = 0;  // older kernels: touch a byte per page
      for (const uint8_t* q = p; q < p + n; q += page) sink = sink + *q;
    }
  });
}

Status Executor::Impl::open_devices() {
  const plan::Plan& pl = plan.plan();
  for (const plan::Device* d : *pl.devices()) {
    auto st = std::make_unique<DeviceState>();
    st->index = d->index();
    st->name = device_name(*d);
    if (d->kind() == plan::DeviceKind::CUDA) {
      st->api = kern::find_device_api("cuda");
      if (!st->api)
        return err(plan.path(), ": the plan runs on ", st->name,
                   ", and this build of kt has no CUDA support (compile the plan with --gpu-mem 0 for the CPU)");
      if (st->index < 0 || st->index >= st->api->count())
        return err(plan.path(), ": the plan runs on ", st->name, ", and this machine has ", st->api->count(),
                   " CUDA device(s)");
      std::string e;
      st->queue = st->api->create_queue(st->index, &e);
      if (!st->queue) return err(plan.path(), ": ", st->name, ": ", e);
    }
    devices.push_back(std::move(st));
  }
  return ok_status();
}

// Before anything is allocated: does each GPU have room for what the plan
// puts there? One line with the figures and what to change.
Status Executor::Impl::check_device_memory() const {
  const plan::Plan& pl = plan.plan();
  for (uint32_t i = 0; i < pl.devices()->size(); ++i) {
    const DeviceState& st = *devices[i];
    if (!st.api) continue;
    const plan::Device& d = *pl.devices()->Get(i);
    const uint64_t kv = d.kv_bytes_per_token() * uint64_t(n_ctx) * uint64_t(options.n_slots);
    const uint64_t need = d.weight_bytes() + d.arena_bytes() + kv;
    uint64_t free_bytes = 0, total = 0;
    if (!st.api->mem_info(st.index, &free_bytes, &total)) continue;
    // Leave room for the CUDA context, cuBLAS workspaces and fragmentation.
    const uint64_t reserve = 512ull << 20;
    if (need + reserve > free_bytes) {
      auto gib = [](uint64_t b) { return std::to_string(double(b) / double(1ull << 30)).substr(0, 5) + " GiB"; };
      const uint64_t room = free_bytes > reserve + kv + d.arena_bytes() ? free_bytes - reserve - kv - d.arena_bytes() : 0;
      return err(plan.path(), ": ", st.name, " has ", gib(free_bytes), " free, the plan needs ", gib(need),
                 " (weights ", gib(d.weight_bytes()), ", KV cache ", gib(kv), " for ", options.n_slots, " x ", n_ctx,
                 " tokens, activations ", gib(d.arena_bytes()), "): recompile with --gpu-mem ", room >> 20,
                 "MiB or lower --ctx");
    }
  }
  return ok_status();
}

Status Executor::Impl::bind_weights() {
  const plan::Plan& pl = plan.plan();
  if (!pl.weights()) return ok_status();
  for (const plan::Weight* w : *pl.weights()) {
    const std::string name = w->tensor()->str();
    const GgufTensor* t = gguf.tensor(name);
    if (!t) return err(plan.path(), ": weight '", printable(name), "' is not in ", gguf.path());
    if (uint32_t(t->type) != w->type())
      return err(plan.path(), ": weight '", printable(name), "' is ", type_name(t->type), " in ", gguf.path(),
                 ", the plan expects type id ", w->type());
    for (uint32_t d = 0; d < 4; ++d) {
      const int64_t want = d < w->shape()->size() ? w->shape()->Get(d) : 1;
      if (t->ne[d] != want)
        return err(plan.path(), ": weight '", printable(name), "' has shape ", t->shape_string(), " in ",
                   gguf.path(), ", the plan expects another");
    }
    const std::string_view layout = w->layout() ? w->layout()->string_view() : "gguf";
    if (layout != "gguf" && layout != "int8" && layout != "int4")
      return err(plan.path(), ": weight '", printable(name), "': layout '", printable(layout), "' is unknown");
    kern::WeightView v;
    v.data = t->data;
    v.host = t->data;
    v.type = t->type;
    v.name = w->tensor()->string_view();
    for (int d = 0; d < 4; ++d) v.ne[d] = t->ne[d];
    v.set_packed_strides();
    DeviceState& dev = *devices[size_t(w->device())];
    // A subset of the matrices (hot experts): gathered, in the plan's order.
    std::vector<int64_t> mats;
    if (w->matrices()) mats.assign(w->matrices()->begin(), w->matrices()->end());
    const uint64_t bytes = mats.empty() ? t->nbytes : v.nb[2] * mats.size();
    if (!mats.empty()) {
      v.ne[2] = int64_t(mats.size());
      v.nb[3] = bytes;
    }
    if (dev.api) {
      // Uploaded once; the mapping stays the host copy factories may read
      // (whole: a subset's host pointer is its first matrix only).
      std::string e;
      void* p = dev.api->alloc(dev.index, bytes, &e);
      if (!p) return err(plan.path(), ": weight '", printable(name), "' on ", dev.name, ": ", e);
      dev.owned.push_back(p);
      if (mats.empty()) {
        if (!dev.api->copy(p, t->data, t->nbytes, nullptr, &e))
          return err(plan.path(), ": weight '", printable(name), "' on ", dev.name, ": ", e);
      } else {
        for (size_t i = 0; i < mats.size(); ++i)
          if (!dev.api->copy(static_cast<uint8_t*>(p) + i * v.nb[2], t->data + uint64_t(mats[i]) * v.nb[2], v.nb[2],
                             nullptr, &e))
            return err(plan.path(), ": weight '", printable(name), "' on ", dev.name, ": ", e);
        v.host = nullptr;
      }
      v.data = p;
    } else if (!mats.empty()) {
      // The CPU reads the mapping in place; a subset needs its own copy.
      host_copies.emplace_back(bytes);
      for (size_t i = 0; i < mats.size(); ++i)
        std::memcpy(host_copies.back().data() + i * v.nb[2], t->data + uint64_t(mats[i]) * v.nb[2], v.nb[2]);
      v.data = v.host = host_copies.back().data();
    }
    if (layout == "int8") KT_TRY(repack_weight(name, dev, kern::WeightLayout::Int8, v));
    if (layout == "int4") KT_TRY(repack_weight(name, dev, kern::WeightLayout::Int4, v));
    weights.push_back(v);
  }
  return ok_status();
}

// A CPU weight whose plan layout is "int8" or "int4" (KTransformers' AMXInt8
// or AMXInt4 experts): repacked once, here, for every call that reads it
// (kernels/cpu/matmul_i8.h); the mapping stays what `host` points at, for the
// reference kernels.
Status Executor::Impl::repack_weight(const std::string& name, const DeviceState& dev, kern::WeightLayout to,
                                     kern::WeightView& v) {
  const cpu::WeightBits bits = to == kern::WeightLayout::Int4 ? cpu::WeightBits::Int4 : cpu::WeightBits::Int8;
  const char* layout = kern::layout_name(to);
  if (dev.api)
    return err(plan.path(), ": weight '", printable(name), "': layout '", layout, "' is for CPU weights, not ",
               dev.name);
  if (!type_traits(v.type).supported() || v.ne[3] != 1)
    return err(plan.path(), ": weight '", printable(name), "': layout '", layout, "' takes 2-D or 3-D weights of a "
               "type with reference kernels, not ", type_name(v.type), " ", v.ne[0], "x", v.ne[1], "x", v.ne[2], "x",
               v.ne[3]);
  const uint64_t bytes = uint64_t(cpu::i8_matrix_bytes(v.ne[0], v.ne[1], bits)) * uint64_t(v.ne[2]);
  auto m = HostMemory::allocate(bytes, "weight '" + printable(name) + "' repacked to " + layout, "");
  if (!m.ok()) return err(plan.path(), ": ", m.error().message);
  cpu::repack_i8_matrices(v.type, v.data, v.nb[1], v.nb[2], v.ne[0], v.ne[1], v.ne[2], m->data(), pool->n_threads(),
                          bits);
  v.data = m->data();
  v.layout = to;
  host_repacked.push_back(std::move(*m));
  return ok_status();
}

Status Executor::Impl::allocate() {
  const plan::Plan& pl = plan.plan();
  for (uint32_t i = 0; i < pl.devices()->size(); ++i) {
    DeviceState& st = *devices[i];
    const uint64_t bytes = pl.devices()->Get(i)->arena_bytes();
    std::string e;
    if (st.api) {
      if (bytes == 0) continue;
      void* p = st.api->alloc(st.index, bytes, &e);
      if (!p) return err(plan.path(), ": ", st.name, ": the activation arena: ", e);
      st.owned.push_back(p);
      st.arena = static_cast<uint8_t*>(p);
      continue;
    }
    auto m = HostMemory::allocate(bytes, "the activation arena");
    if (!m.ok()) return err(plan.path(), ": ", m.error().message);
    st.host_arena = std::move(*m);
    st.arena = st.host_arena.data();
    // Copies between this arena and a GPU run asynchronously only from pinned memory.
    if (any_gpu() && bytes > 0) {
      for (auto& d : devices)
        if (d->api) {
          if (!d->api->pin(st.arena, bytes, &e)) return err(plan.path(), ": pinning the host arena: ", e);
          st.pinned_by = d->api;
          break;
        }
    }
  }
  if (pl.buffers())
    for (const plan::Buffer* b : *pl.buffers()) {
      kern::Act a;
      a.data = devices[size_t(b->device())]->arena + b->offset();
      a.type = GgmlType(b->type());
      a.cols = b->row_elems();
      a.max_rows = b->max_rows();
      buffers.push_back(a);
      row_kinds.push_back(b->rows());
      buffer_device.push_back(b->device());
    }

  // KV caches: n_slots sequences of n_ctx tokens per layer, on its device.
  if (pl.kv())
    for (const plan::KvCache* c : *pl.kv()) {
      kern::KvView v;
      v.kind = c->kind() == plan::KvKind::MLA_LATENT ? kern::KvView::Kind::MlaLatent : kern::KvView::Kind::Kv;
      v.type = GgmlType(c->type());
      v.n_slots = options.n_slots;
      v.n_ctx = n_ctx;
      v.n_kv_heads = c->n_kv_heads();
      v.k_cols = c->k_cols();
      v.v_cols = c->v_cols();
      const uint64_t rows = uint64_t(v.n_slots) * uint64_t(v.n_ctx);
      const uint64_t k_bytes = rows * uint64_t(v.k_cols) * v.elem_bytes();
      const uint64_t v_bytes = rows * uint64_t(v.v_cols) * v.elem_bytes();
      const std::string what = "the KV cache of layer " + std::to_string(c->layer());
      DeviceState& dev = *devices[size_t(c->device())];
      uint8_t* base = nullptr;
      if (dev.api) {
        std::string e;
        void* p = dev.api->alloc(dev.index, k_bytes + v_bytes, &e);
        if (!p) return err(plan.path(), ": ", dev.name, ": ", what, ": ", e);
        dev.owned.push_back(p);
        if (!dev.api->memset_zero(dev.index, p, k_bytes + v_bytes, &e)) return err(plan.path(), ": ", what, ": ", e);
        base = static_cast<uint8_t*>(p);
      } else {
        auto m = HostMemory::allocate(k_bytes + v_bytes, what);
        if (!m.ok()) return err(plan.path(), ": ", m.error().message);
        base = m->data();
        kv_memory.push_back(std::move(*m));
      }
      v.k = base;
      v.v = base + k_bytes;
      kvs.push_back(v);
      kv_device.push_back(c->device());
    }
  filled.assign(size_t(options.n_slots), 0);
  return ok_status();
}

uint64_t Executor::Impl::buffer_bytes(int b) const {
  const kern::Act& a = buffers[size_t(b)];
  return uint64_t(a.max_rows) * uint64_t(a.cols) * type_traits(a.type).type_size;
}

Status Executor::Impl::settle_host(const BoundCall& c, bool all) {
  if (pending.empty()) return ok_status();
  auto touches = [&](const PendingCopy& p) {
    if (all) return true;
    auto overlaps = [&](int b, bool writing) {
      const auto* lo = static_cast<const uint8_t*>(buffers[size_t(b)].data);
      const auto* hi = lo + buffer_bytes(b);
      // Reading waits for pending writes; writing waits for every pending copy.
      if (!writing && !p.writes) return false;
      for (const auto& [begin, end] : p.host)
        if (lo < end && begin < hi) return true;
      return false;
    };
    for (int b : c.in)
      if (overlaps(b, false)) return true;
    for (int b : c.out)
      if (overlaps(b, true)) return true;
    return false;
  };
  std::string e;
  for (size_t i = 0; i < pending.size();) {
    PendingCopy& p = pending[i];
    if (p.api->event_done(p.event) || touches(p)) {
      const bool ok = p.api->wait_event(p.event, &e);
      p.api->release_event(p.event);
      pending[i] = std::move(pending.back());
      pending.pop_back();
      if (!ok) return err(plan.path(), ": ", e);
      continue;
    }
    ++i;
  }
  return ok_status();
}

kern::CallArgs Executor::Impl::args_for(BoundCall& c, const kern::Step& step) {
  for (size_t k = 0; k < c.in.size(); ++k) c.in_acts[k] = buffers[size_t(c.in[k])];
  for (size_t k = 0; k < c.out.size(); ++k) c.out_acts[k] = buffers[size_t(c.out[k])];
  kern::CallArgs a;
  a.in = c.in_acts;
  a.out = c.out_acts;
  a.weights = c.weights;
  a.kv = c.kv >= 0 ? &kvs[size_t(c.kv)] : nullptr;
  a.step = &step;
  a.par = pool.get();
  a.routing = routing;
  a.layer = c.layer;
  a.queue = devices[size_t(c.device)]->queue;
  return a;
}

void Executor::Impl::account(const std::string& row, std::chrono::steady_clock::time_point t0) {
  KernelTime& kt = profile[row];
  kt.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++kt.calls;
}

Status Executor::Impl::after_transfer(const BoundCall& c, DeviceState& dev) {
  if (!is_host_copy(c)) return ok_status();
  const bool down = c.transfer == kern::Kernel::Transfer::Download;
  // One event for the call; each host buffer it reads or writes waits for it
  // (a call may carry several buffers).
  std::string e;
  void* ev = dev.api->record_event(dev.queue, &e);
  if (!ev) return err(plan.path(), ": ", e);
  PendingCopy p{{}, down, dev.api, ev};
  for (int b : down ? c.out : c.in) {
    const auto* lo = static_cast<const uint8_t*>(buffers[size_t(b)].data);
    p.host.emplace_back(lo, lo + buffer_bytes(b));
  }
  pending.push_back(std::move(p));
  return ok_status();
}

Status Executor::Impl::run_call(BoundPhase& ph, BoundCall& c, const kern::Step& step) {
  DeviceState& dev = *devices[size_t(c.device)];
  if (!dev.api) {
    // The host's wait for the GPU's copies shows as its own row: in a hybrid
    // plan it is the GPU's share of the round trip.
    const bool count = profiling && !pending.empty();
    const auto t0 = std::chrono::steady_clock::now();
    KT_TRY(settle_host(c, false));
    if (count) account(ph.name + " (host waits for GPU copies)", t0);
  }
  if (c.transfer == kern::Kernel::Transfer::Peer)  // the source GPU's work first
    for (int b : c.in) {
      DeviceState& src = *devices[size_t(buffer_device[size_t(b)])];
      std::string e;
      if (src.api && src.queue != dev.queue && !src.api->sync(src.queue, &e)) return err(plan.path(), ": ", e);
    }
  const kern::CallArgs a = args_for(c, step);
  std::string e;
  void* from = profiling && dev.api ? dev.api->record_timed_event(dev.queue, &e) : nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  c.kernel->run(a);
  if (profiling) {
    const std::string row = ph.name + " " + std::string(c.name) + " (" + std::string(c.kernel->impl()) + ")";
    account(row, t0);
    if (from) {
      void* to = dev.api->record_timed_event(dev.queue, &e);
      if (to) timed.push_back(TimedCall{row + " [gpu]", dev.api, from, to});
      else dev.api->release_event(from);
    }
  }
  return after_transfer(c, dev);
}

Status Executor::Impl::bind_calls() {
  const plan::Plan& pl = plan.plan();
  for (const plan::Phase* ph : *pl.phases()) {
    BoundPhase bp;
    bp.name = ph->name() ? ph->name()->str() : "";
    bp.max_tokens = ph->max_tokens();
    bp.min_tokens = ph->min_tokens();
    bp.logits = ph->logits();
    if (plan.plan().buffers()->Get(uint32_t(bp.logits))->row_elems() != pl.model()->n_vocab())
      return err(plan.path(), ": phase ", printable(bp.name), ": the logits buffer is not n_vocab wide");
    if (ph->calls())
      for (uint32_t ci = 0; ci < ph->calls()->size(); ++ci) {
        const plan::Call& c = *ph->calls()->Get(ci);
        BoundCall bc;
        bc.name = c.kernel()->string_view();
        kern::CallSpec spec;
        spec.kernel = bc.name;
        spec.path = c.path() ? c.path()->string_view() : "";
        spec.layer = c.layer();
        spec.rounding = options.rounding;
        spec.impl = options.impl;
        const DeviceState& dev = *devices[size_t(c.device())];
        spec.device = dev.api ? dev.index : -1;
        spec.params = read_params(c);
        if (c.inputs())
          for (int b : *c.inputs()) {
            bc.in.push_back(b);
            spec.in.push_back({buffers[size_t(b)].type, buffers[size_t(b)].cols, buffers[size_t(b)].max_rows});
          }
        if (c.outputs())
          for (int b : *c.outputs()) {
            bc.out.push_back(b);
            spec.out.push_back({buffers[size_t(b)].type, buffers[size_t(b)].cols, buffers[size_t(b)].max_rows});
          }
        if (c.weights())
          for (int w : *c.weights()) bc.weights.push_back(weights[size_t(w)]);
        spec.weights = bc.weights;
        bc.kv = c.kv();
        bc.layer = c.layer();
        bc.device = c.device();
        if (bc.kv >= 0) {
          if (kv_device[size_t(bc.kv)] != bc.device)
            return err(plan.path(), ": ", printable(bp.name), " call ", ci, " (", printable(spec.path), ") runs on ",
                       dev.name, " but its KV cache lives on ", devices[size_t(kv_device[size_t(bc.kv)])]->name);
          spec.kv = &kvs[size_t(bc.kv)];
        }
        std::string error;
        bc.kernel = kern::find_kernel(bc.name)->make(spec, &error);
        if (!bc.kernel)
          return err(plan.path(), ": ", printable(bp.name), " call ", ci, " (", printable(spec.path), ") ",
                     printable(bc.name), ": ", error);
        // Everything a call touches lives on its device, but for copies.
        bc.transfer = bc.kernel->transfer();
        if (bc.transfer == kern::Kernel::Transfer::None)
          for (const std::vector<int>* list : {&bc.in, &bc.out})
            for (int b : *list)
              if (buffer_device[size_t(b)] != bc.device)
                return err(plan.path(), ": ", printable(bp.name), " call ", ci, " (", printable(spec.path), ") runs on ",
                           dev.name, " but buffer '", printable(pl.buffers()->Get(uint32_t(b))->name()->string_view()),
                           "' lives on ", devices[size_t(buffer_device[size_t(b)])]->name);
        bc.in_acts.resize(bc.in.size());
        bc.out_acts.resize(bc.out.size());
        bp.calls.push_back(std::move(bc));
      }
    if (bp.name == "prefill") prefill = int(phases.size());
    if (bp.name.rfind("prefill.", 0) == 0 && bp.min_tokens > 0) prefill_variants.push_back(int(phases.size()));
    if (bp.name == "decode") decode = int(phases.size());
    phases.push_back(std::move(bp));
  }
  if (prefill < 0 && decode < 0) return err(plan.path(), ": plan has neither a prefill nor a decode phase");
  if (!prefill_variants.empty() && prefill < 0)
    return err(plan.path(), ": plan has prefill variants but no prefill phase for short steps");
  std::sort(prefill_variants.begin(), prefill_variants.end(),
            [&](int a, int b) { return phases[size_t(a)].min_tokens < phases[size_t(b)].min_tokens; });
  // Every step length up to the longest prefill phase has a phase.
  if (!prefill_variants.empty()) {
    int64_t covered = phases[size_t(prefill)].max_tokens;
    for (int v : prefill_variants) {
      const BoundPhase& ph = phases[size_t(v)];
      if (ph.min_tokens > covered + 1)
        return err(plan.path(), ": phase ", printable(ph.name), " starts at ", ph.min_tokens,
                   " tokens, past the ", covered, " the phases before it take");
      covered = std::max(covered, ph.max_tokens);
    }
  }
  if (prefill < 0) prefill = decode;
  if (decode < 0) decode = prefill;
  return ok_status();
}

Status Executor::Impl::check_batch(const Batch& b, const BoundPhase& ph) const {
  const int64_t n = int64_t(b.tokens.size());
  if (n == 0) return err("forward: no tokens");
  if (n > ph.max_tokens)
    return err("forward: ", n, " tokens in one step, the plan's ", ph.name, " phase takes at most ", ph.max_tokens);
  if (int64_t(b.pos.size()) != n || int64_t(b.slot.size()) != n)
    return err("forward: tokens, positions and slots differ in length");
  if (b.outputs.empty()) return err("forward: no output rows asked for");
  const int64_t n_vocab = plan.plan().model()->n_vocab();
  std::vector<int64_t> next(filled);  // each slot's next position as the step proceeds
  std::vector<bool> seen(filled.size(), false), done(filled.size(), false);
  int32_t prev_slot = -1;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = b.tokens[size_t(i)], p = b.pos[size_t(i)], s = b.slot[size_t(i)];
    if (t < 0 || t >= n_vocab) return err("forward: token ", t, " at index ", i, " is outside the vocabulary of ", n_vocab);
    if (s < 0 || size_t(s) >= filled.size()) return err("forward: slot ", s, " at index ", i, " does not exist (", filled.size(), " slots)");
    if (p < 0 || p >= n_ctx) return err("forward: position ", p, " is past the context of ", n_ctx, " tokens");
    if (s != prev_slot) {
      if (seen[size_t(s)]) return err("forward: the tokens of slot ", s, " are not consecutive in the step");
      seen[size_t(s)] = true;
      // A sequence continues where its cache ends, or rewinds into it.
      if (p > next[size_t(s)])
        return err("forward: position ", p, " in slot ", s, " skips positions: the cache holds ", next[size_t(s)]);
    } else if (p != next[size_t(s)]) {
      return err("forward: positions in slot ", s, " are not consecutive");
    }
    next[size_t(s)] = p + 1;
    prev_slot = s;
  }
  for (size_t k = 0; k < b.outputs.size(); ++k) {
    const int32_t o = b.outputs[k];
    if (o < 0 || o >= n || (k > 0 && o <= b.outputs[k - 1]))
      return err("forward: output rows must be increasing token indices below ", n);
  }
  return ok_status();
}

Executor::Executor(std::unique_ptr<Impl> impl) : p_(std::move(impl)) {}
Executor::~Executor() = default;

Result<std::unique_ptr<Executor>> Executor::load(const std::string& plan_path, const ExecOptions& options) {
  auto plan = PlanFile::load(plan_path);
  if (!plan.ok()) return plan.error();
  auto gguf = GgufFile::open(plan->gguf_path());
  if (!gguf.ok()) return err(plan_path, ": ", gguf.error().message);
  KT_TRY(plan->check_gguf(*gguf));
  auto p = std::make_unique<Impl>(std::move(*plan), std::move(*gguf), options);
  const int64_t plan_ctx = p->plan.plan().model()->n_ctx();
  if (options.n_ctx < 0 || options.n_ctx > plan_ctx)
    return err(plan_path, ": --ctx ", options.n_ctx, " is beyond the ", plan_ctx,
               " tokens the plan was compiled for (kt-compile --ctx)");
  if (options.n_slots < 1 || options.n_slots > 4096) return err(plan_path, ": bad number of sequence slots ", options.n_slots);
  p->n_ctx = options.n_ctx > 0 ? options.n_ctx : plan_ctx;
  // Kernels first: a plan for another build (CUDA kernels on a CPU build) is
  // named by what it lacks.
  KT_TRY(p->plan.check_kernels([](std::string_view n) { return kern::find_kernel(n) != nullptr; }));
  p->pool = std::make_unique<ThreadPool>(options.threads);
  KT_TRY(p->open_devices());
  KT_TRY(p->check_device_memory());
  KT_TRY(p->bind_weights());
  p->populate_cpu_weights();
  KT_TRY(p->allocate());
  KT_TRY(p->bind_calls());
  return std::unique_ptr<Executor>(new Executor(std::move(p)));
}

const plan::Plan& Executor::plan() const { return p_->plan.plan(); }
const PlanFile& Executor::plan_file() const { return p_->plan; }
const GgufFile& Executor::gguf() const { return p_->gguf; }
int64_t Executor::n_vocab() const { return plan().model()->n_vocab(); }
int64_t Executor::n_ctx() const { return p_->n_ctx; }
int Executor::n_slots() const { return p_->options.n_slots; }
int Executor::n_threads() const { return p_->pool->n_threads(); }
int64_t Executor::max_tokens(PhaseKind phase) const {
  if (phase == PhaseKind::Prefill && !p_->prefill_variants.empty()) {
    int64_t m = p_->phases[size_t(p_->prefill)].max_tokens;
    for (int v : p_->prefill_variants) m = std::max(m, p_->phases[size_t(v)].max_tokens);
    return m;
  }
  return p_->phases[size_t(phase == PhaseKind::Prefill ? p_->prefill : p_->decode)].max_tokens;
}
void Executor::set_routing_hook(kern::RoutingHook* hook) { p_->routing = hook; }
void Executor::Impl::settle_timed() {
  for (TimedCall& t : timed) {
    const double ms = t.api->elapsed_ms(t.from, t.to);
    if (ms >= 0) {
      KernelTime& k = profile[t.row];
      k.seconds += ms * 1e-3;
      ++k.calls;
    }
    t.api->release_event(t.from);
    t.api->release_event(t.to);
  }
  timed.clear();
}

void Executor::set_profiling(bool on) { p_->profiling = on; }
void Executor::clear_profile() { p_->profile.clear(); }
void Executor::set_cuda_graphs(bool on) { p_->options.cuda_graphs = on; }
size_t Executor::cuda_graphs() const { return p_->recordings_made; }

std::string Executor::profile_report() const {
  std::vector<std::pair<std::string, Impl::KernelTime>> rows(p_->profile.begin(), p_->profile.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  for (const auto& r : rows)  // the [gpu] rows time the same calls again, on the GPU
    if (!r.first.ends_with("[gpu]")) total += r.second.seconds;
  std::string s;
  char line[256];
  for (const auto& [name, t] : rows) {
    std::snprintf(line, sizeof line, "%-56s %8llu calls %9.3f ms %5.1f%%\n", name.c_str(), (unsigned long long)t.calls,
                  t.seconds * 1e3, total > 0 ? 100.0 * t.seconds / total : 0.0);
    s += line;
  }
  return s;
}

std::string Executor::kernel_summary() const {
  std::map<std::string, std::map<std::string, int>> counts;
  for (const BoundPhase& ph : p_->phases)
    for (const BoundCall& c : ph.calls) ++counts[ph.name + " " + std::string(c.name)][std::string(c.kernel->impl())];
  std::string s;
  for (const auto& [name, impls] : counts) {
    s += name + ":";
    for (const auto& [impl, n] : impls) s += " " + impl + " x" + std::to_string(n);
    s += "\n";
  }
  return s;
}

Result<std::span<const float>> Executor::forward(const Batch& batch, PhaseKind phase) {
  Impl& p = *p_;
  BoundPhase& ph = p.phase_for(phase, int64_t(batch.tokens.size()));
  KT_TRY(p.check_batch(batch, ph));
  set_flush_denormals();
  const int64_t n = int64_t(batch.tokens.size()), n_out = int64_t(batch.outputs.size());
  kern::Step step;
  step.n_tokens = n;
  step.tokens = batch.tokens.data();
  step.pos = batch.pos.data();
  step.slot = batch.slot.data();
  step.n_outputs = n_out;
  step.outputs = batch.outputs.data();
  for (size_t b = 0; b < p.buffers.size(); ++b) p.buffers[b].rows = p.row_kinds[b] == plan::RowKind::OUTPUTS ? n_out : n;

  ++p.recorded_steps;
  const bool record = p.options.cuda_graphs && !p.recording_off && p.decode != p.prefill &&
                      &ph == &p.phases[size_t(p.decode)] && p.any_gpu();
  bool gated = false;
  if (record) {
    const int gdev = p.gated_device(ph, step);
    if (gdev >= 0) KT_TRY(p.run_gated(ph, gdev, step, &gated));
  }
  for (size_t i = gated ? ph.calls.size() : 0; i < ph.calls.size();) {
    const size_t j = record ? p.recordable_end(ph, i, step) : i + 1;
    if (j - i >= size_t(std::max(2, p.options.cuda_graph_min_calls))) {
      KT_TRY(p.run_recorded(ph, i, j, step));
    } else {
      for (size_t k = i; k < j; ++k) KT_TRY(p.run_call(ph, ph.calls[k], step));
    }
    i = j;
  }
  // The logits (and every copy) are complete before the host reads them.
  const auto t_end = std::chrono::steady_clock::now();
  for (auto& d : p.devices) {
    std::string e;
    if (d->api && !d->api->sync(d->queue, &e)) return err(p.plan.path(), ": ", e);
  }
  KT_TRY(p.settle_host(BoundCall{}, true));
  p.settle_timed();
  if (p.profiling && p.any_gpu()) p.account(ph.name + " (host waits for the step's end)", t_end);
  for (int64_t i = 0; i < n; ++i) p.filled[size_t(batch.slot[size_t(i)])] = batch.pos[size_t(i)] + 1;
  const kern::Act& logits = p.buffers[size_t(ph.logits)];
  return std::span<const float>(logits.f32(), size_t(n_out * logits.cols));
}

}  // namespace kt
