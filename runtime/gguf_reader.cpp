// GGUF parsing and validation. The layout (gguf.md in ggml's docs):
//   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
//   n_kv x (string key | u32 type | value)
//   n_tensors x (string name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset)
//   padding to general.alignment | tensor data (offsets relative to here)
// Strings are u64 length + bytes. Every read goes through Cursor, which refuses
// to step outside the mapping, so no count or length in the file can make us read
// out of bounds or allocate more than the file itself could describe.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/gguf.h"

namespace kt {

namespace {
constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxDims = 4;              // ggml's GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;        // nested arrays deeper than this are refused
constexpr uint64_t kMaxAlignment = 1 << 20;

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }

bool known_value_type(uint32_t t) { return t <= uint32_t(GgufType::FLOAT64); }
}  // namespace

struct GgufFile::Mapping {
  void* addr = nullptr;
  size_t len = 0;
  std::vector<uint8_t> owned;  // from_bytes()
  ~Mapping() {
    if (addr && len) munmap(addr, len);
  }
};

// Parses the header, metadata and tensor table into a GgufFile.
class GgufParser {
 public:
  GgufParser(GgufFile& f) : f_(f), p_(f.base_), size_(f.size_) {}

  Status parse() {
    uint32_t magic = 0;
    if (size_ < 4) return fail(0, "header", "file is ", size_, " bytes, too short for the GGUF magic");
    KT_TRY(read_u32(&magic, "magic"));
    if (magic != kMagic) return fail(0, "magic", "not a GGUF file (magic bytes are not \"GGUF\")");
    uint64_t at = pos_;
    KT_TRY(read_u32(&f_.version_, "version"));
    if (f_.version_ == 1) return fail(at, "version", "GGUF v1 (32-bit counts) is not supported; convert the file to v3");
    if (f_.version_ == 0x02000000 || f_.version_ == 0x03000000)
      return fail(at, "version", "big-endian GGUF is not supported");
    if (f_.version_ != 2 && f_.version_ != 3)
      return fail(at, "version", "unknown GGUF version ", f_.version_, " (supported: 2, 3)");
    uint64_t n_tensors = 0, n_kv = 0;
    at = pos_;
    KT_TRY(read_u64(&n_tensors, "tensor count"));
    // Each tensor entry needs at least 8 (name len) + 4 + 4 + 8 bytes; each KV 8 + 4 + 1.
    if (n_tensors > (size_ - pos_) / 24) return fail(at, "tensor count", n_tensors, " tensors cannot fit in a file of ", size_, " bytes");
    at = pos_;
    KT_TRY(read_u64(&n_kv, "metadata count"));
    if (n_kv > (size_ - pos_) / 13) return fail(at, "metadata count", n_kv, " key-value pairs cannot fit in a file of ", size_, " bytes");

    f_.kvs_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) KT_TRY(parse_kv(i));
    KT_TRY(apply_alignment());

    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) KT_TRY(parse_tensor_info(i));

    uint64_t data_off = 0;
    if (add_overflows(pos_, f_.alignment_ - 1, &data_off)) return fail(pos_, "data section", "offset overflows");
    data_off -= data_off % f_.alignment_;
    // A file with no tensors may end right after its table (no padding written).
    if (data_off > size_ && !f_.tensors_.empty())
      return fail(pos_, "data section", "starts at ", data_off, ", past the end of the file (", size_, " bytes)");
    f_.data_offset_ = std::min<uint64_t>(data_off, size_);
    return check_tensor_data();
  }

 private:
  template <class... P>
  Error fail(uint64_t off, std::string_view field, P&&... parts) {
    return err(f_.path_, ":", off, ": ", field, ": ", std::forward<P>(parts)...);
  }

  Status need(uint64_t n, std::string_view field) {
    if (n > size_ - pos_)
      return fail(pos_, field, "needs ", n, " bytes but only ", size_ - pos_, " remain (file truncated?)");
    return ok_status();
  }
  template <class T>
  Status read_pod(T* out, std::string_view field) {
    KT_TRY(need(sizeof(T), field));
    std::memcpy(out, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return ok_status();
  }
  Status read_u32(uint32_t* out, std::string_view field) { return read_pod(out, field); }
  Status read_u64(uint64_t* out, std::string_view field) { return read_pod(out, field); }

  Status read_string(std::string_view* out, std::string_view field) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    KT_TRY(read_u64(&len, field));
    if (len > size_ - pos_)
      return fail(at, field, "string length ", len, " runs past the end of the file (", size_ - pos_, " bytes remain)");
    *out = std::string_view(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return ok_status();
  }

  // Reads a value of type t at pos_ into v (which views the mapping).
  Status parse_value(GgufType t, GgufValue* v, const std::string& field, int depth) {
    v->type_ = t;
    v->data_ = p_ + pos_;
    if (uint64_t sz = GgufValue::scalar_size_of(t)) {
      KT_TRY(need(sz, field));
      if (t == GgufType::BOOL && p_[pos_] > 1)
        return fail(pos_, field, "boolean value ", int(p_[pos_]), " is neither 0 nor 1");
      v->nbytes_ = sz;
      pos_ += sz;
      return ok_status();
    }
    if (t == GgufType::STRING) {
      std::string_view s;
      KT_TRY(read_string(&s, field));
      v->data_ = reinterpret_cast<const uint8_t*>(s.data()) - 8;  // keep the length prefix in view
      v->nbytes_ = s.size() + 8;
      return ok_status();
    }
    // ARRAY: u32 element type, u64 count, elements.
    if (depth >= kMaxArrayDepth) return fail(pos_, field, "arrays nested more than ", kMaxArrayDepth, " deep");
    uint64_t at = pos_;
    uint32_t et = 0;
    KT_TRY(read_u32(&et, field));
    if (!known_value_type(et)) return fail(at, field, "unknown array element type ", et);
    v->elem_type_ = GgufType(et);
    at = pos_;
    uint64_t count = 0;
    KT_TRY(read_u64(&count, field));
    v->count_ = count;
    v->data_ = p_ + pos_;
    const uint64_t esz = GgufValue::scalar_size_of(v->elem_type_);
    if (esz) {
      uint64_t total = 0;
      if (mul_overflows(count, esz, &total) || total > size_ - pos_)
        return fail(at, field, "array of ", count, " ", gguf_type_name(v->elem_type_), " runs past the end of the file");
      if (v->elem_type_ == GgufType::BOOL)
        for (uint64_t i = 0; i < count; ++i)
          if (p_[pos_ + i] > 1) return fail(pos_ + i, field, "boolean array element is neither 0 nor 1");
      v->nbytes_ = total;
      pos_ += total;
      return ok_status();
    }
    // Strings take >= 8 bytes each and arrays >= 12, so this bound keeps the
    // offsets vector no larger than the file justifies.
    const uint64_t min_elem = v->elem_type_ == GgufType::STRING ? 8 : 12;
    if (count > (size_ - pos_) / min_elem)
      return fail(at, field, "array of ", count, " ", gguf_type_name(v->elem_type_), " cannot fit in the ", size_ - pos_, " bytes left");
    auto offsets = std::make_shared<std::vector<uint64_t>>();
    offsets->reserve(count);
    const uint64_t start = pos_;
    for (uint64_t i = 0; i < count; ++i) {
      offsets->push_back(pos_ - start);
      GgufValue elem;
      KT_TRY(parse_value(v->elem_type_, &elem, field, depth + 1));
    }
    v->nbytes_ = pos_ - start;
    v->elem_offsets_ = std::move(offsets);
    return ok_status();
  }

  Status parse_kv(uint64_t i) {
    const uint64_t at = pos_;
    std::string_view key;
    KT_TRY(read_string(&key, "metadata key " + std::to_string(i)));
    std::string field = "metadata '" + printable(key) + "'";
    if (key.empty()) return fail(at, field, "empty key");
    if (f_.kv_index_.count(key)) return fail(at, field, "duplicate key");
    const uint64_t tat = pos_;
    uint32_t t = 0;
    KT_TRY(read_u32(&t, field));
    if (!known_value_type(t)) return fail(tat, field, "unknown value type ", t);
    GgufKV kv{std::string(key), GgufValue{}, at};
    KT_TRY(parse_value(GgufType(t), &kv.value, field, 0));
    f_.kv_index_.emplace(kv.key, f_.kvs_.size());
    f_.kvs_.push_back(std::move(kv));
    return ok_status();
  }

  Status apply_alignment() {
    auto it = f_.kv_index_.find(std::string_view("general.alignment"));
    if (it == f_.kv_index_.end()) return ok_status();
    const GgufKV& kv = f_.kvs_[it->second];
    uint64_t a = 0;
    if (!kv.value.is_integer() || !kv.value.get_u64(&a))
      return fail(kv.file_offset, "metadata 'general.alignment'", "must be an unsigned integer, got ", gguf_type_name(kv.value.type()));
    if (a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment)
      return fail(kv.file_offset, "metadata 'general.alignment'", "alignment ", a, " is not a power of two up to ", kMaxAlignment);
    f_.alignment_ = a;
    return ok_status();
  }

  Status parse_tensor_info(uint64_t i) {
    GgufTensor t;
    t.info_offset = pos_;
    std::string_view name;
    KT_TRY(read_string(&name, "tensor " + std::to_string(i) + " name"));
    t.name = std::string(name);
    const std::string field = "tensor '" + printable(t.name) + "'";
    if (name.empty()) return fail(t.info_offset, field, "empty name");
    if (f_.tensor_index_.count(name)) return fail(t.info_offset, field, "duplicate tensor name");
    uint64_t at = pos_;
    uint32_t n_dims = 0;
    KT_TRY(read_u32(&n_dims, field));
    if (n_dims < 1 || n_dims > kMaxDims) return fail(at, field, n_dims, " dimensions (supported: 1 to ", kMaxDims, ")");
    t.n_dims = int(n_dims);
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      at = pos_;
      uint64_t ne = 0;
      KT_TRY(read_u64(&ne, field));
      if (ne == 0 || ne > uint64_t(INT64_MAX))
        return fail(at, field, "dimension ", d, " is ", ne, " (must be between 1 and 2^63-1)");
      if (mul_overflows(elems, ne, &elems) || elems > uint64_t(INT64_MAX))
        return fail(at, field, "element count overflows 64 bits at dimension ", d);
      t.ne[d] = int64_t(ne);
    }
    at = pos_;
    uint32_t type_id = 0;
    KT_TRY(read_u32(&type_id, field));
    const TypeTraits* tt = find_type(type_id);
    if (!tt) return fail(at, field, "unknown tensor type id ", type_id);
    t.type = tt->type;
    if (t.ne[0] % tt->block_size != 0)
      return fail(at, field, "first dimension ", t.ne[0], " is not a multiple of ", tt->name, "'s block size ", tt->block_size);
    uint64_t blocks = elems / uint64_t(tt->block_size);
    if (mul_overflows(blocks, tt->type_size, &t.nbytes)) return fail(at, field, "byte size overflows 64 bits");
    at = pos_;
    KT_TRY(read_u64(&t.offset, field));
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
    return ok_status();
  }

  // Offsets within the data section: aligned, inside the file, not overlapping.
  Status check_tensor_data() {
    const uint64_t data_size = size_ - f_.data_offset_;
    std::vector<size_t> order(f_.tensors_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (GgufTensor& t : f_.tensors_) {
      const std::string field = "tensor '" + printable(t.name) + "'";
      const uint64_t off_at = t.info_offset + 8 + t.name.size() + 4 + 8 * uint64_t(t.n_dims) + 4;
      if (t.offset % f_.alignment_ != 0)
        return fail(off_at, field, "data offset ", t.offset, " is not a multiple of the alignment ", f_.alignment_);
      uint64_t end = 0;
      if (add_overflows(t.offset, t.nbytes, &end) || end > data_size)
        return fail(off_at, field, "data [", t.offset, ", +", t.nbytes, ") runs past the end of the file (data section is ", data_size, " bytes)");
      t.data = p_ + f_.data_offset_ + t.offset;
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f_.tensors_[a].offset < f_.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const GgufTensor& prev = f_.tensors_[order[k - 1]];
      const GgufTensor& cur = f_.tensors_[order[k]];
      if (cur.offset < prev.offset + prev.nbytes)
        return fail(cur.info_offset, "tensor '" + printable(cur.name) + "'", "data at offset ", cur.offset, " overlaps tensor '",
                    printable(prev.name), "' [", prev.offset, ", +", prev.nbytes, ")");
    }
    return ok_status();
  }

  GgufFile& f_;
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

Result<GgufFile> GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  f.map_ = std::make_unique<Mapping>();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err(path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return err(path, ": not a regular file");
  }
  f.size_ = uint64_t(st.st_size);
  if (f.size_ > 0) {
    void* a = mmap(nullptr, f.size_, PROT_READ, MAP_SHARED, fd, 0);
    if (a == MAP_FAILED) {
      ::close(fd);
      return err(path, ": cannot map ", f.size_, " bytes: ", std::strerror(errno));
    }
    f.map_->addr = a;
    f.map_->len = f.size_;
    f.base_ = static_cast<const uint8_t*>(a);
  }
  ::close(fd);
  GgufParser parser(f);
  KT_TRY(parser.parse());
  return f;
}

Result<GgufFile> GgufFile::from_bytes(std::string name, std::span<const uint8_t> bytes) {
  GgufFile f;
  f.path_ = std::move(name);
  f.map_ = std::make_unique<Mapping>();
  f.map_->owned.assign(bytes.begin(), bytes.end());
  f.base_ = f.map_->owned.data();
  f.size_ = bytes.size();
  GgufParser parser(f);
  KT_TRY(parser.parse());
  return f;
}

GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

std::string_view GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  return v ? v->str() : std::string_view();
}

const GgufTensor* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace kt
