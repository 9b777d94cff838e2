#include "quant/imatrix.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace rapide::quant {
namespace {

void put_i32(std::string& out, int32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}

class Reader {
 public:
  Reader(const std::string& bytes, const std::string& source) : bytes_(bytes), source_(source) {}
  int32_t i32() {
    int32_t v;
    std::memcpy(&v, take(4), 4);
    return v;
  }
  const char* take(size_t n) {
    if (n > bytes_.size() - pos_) {
      fail(ErrorCode::kCorrupt, "imatrix '{}' is truncated at byte {}", source_, pos_);
    }
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  size_t remaining() const { return bytes_.size() - pos_; }
  // A count read from the file, checked against what the rest of the file can hold.
  size_t count(int32_t v, size_t unit, const char* what) {
    if (v < 0 || static_cast<size_t>(v) > remaining() / unit) {
      fail(ErrorCode::kCorrupt, "imatrix '{}': {} {} at byte {} does not fit the file", source_,
           what, v, pos_);
    }
    return static_cast<size_t>(v);
  }

 private:
  const std::string& bytes_;
  const std::string& source_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<float> ImatrixEntry::mean_sq() const {
  std::vector<float> out(values);
  if (ncall > 0) {
    for (float& v : out) v /= static_cast<float>(ncall);
  }
  return out;
}

const ImatrixEntry* Imatrix::find(const std::string& name) const {
  for (const ImatrixEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string serialize_imatrix(const Imatrix& m) {
  std::string out;
  put_i32(out, static_cast<int32_t>(m.entries.size()));
  for (const ImatrixEntry& e : m.entries) {
    put_i32(out, static_cast<int32_t>(e.name.size()));
    out += e.name;
    put_i32(out, e.ncall);
    put_i32(out, static_cast<int32_t>(e.values.size()));
    out.append(reinterpret_cast<const char*>(e.values.data()), e.values.size() * sizeof(float));
  }
  put_i32(out, m.last_call);
  put_i32(out, static_cast<int32_t>(m.dataset.size()));
  out += m.dataset;
  return out;
}

Imatrix parse_imatrix(const std::string& bytes, const std::string& source) {
  Reader r(bytes, source);
  Imatrix m;
  const size_t n = r.count(r.i32(), 12, "entry count");
  if (n == 0) fail(ErrorCode::kCorrupt, "imatrix '{}' has no entries", source);
  for (size_t i = 0; i < n; ++i) {
    ImatrixEntry e;
    const size_t len = r.count(r.i32(), 1, "name length");
    e.name.assign(r.take(len), len);
    e.ncall = r.i32();
    const size_t nval = r.count(r.i32(), sizeof(float), "value count");
    e.values.resize(nval);
    std::memcpy(e.values.data(), r.take(nval * sizeof(float)), nval * sizeof(float));
    m.entries.push_back(std::move(e));
  }
  // The trailer is optional in files from old llama.cpp builds.
  if (r.remaining() >= 4) m.last_call = r.i32();
  if (r.remaining() >= 4) {
    const size_t len = r.count(r.i32(), 1, "dataset length");
    m.dataset.assign(r.take(len), len);
  }
  return m;
}

void write_imatrix(const std::string& path, const Imatrix& m) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string bytes = serialize_imatrix(m);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail(ErrorCode::kInvalidArgument, "cannot write imatrix '{}'", path);
}

Imatrix read_imatrix(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::kNotFound, "cannot open imatrix '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return parse_imatrix(s.str(), path);
}

}  // namespace rapide::quant
