#include "formats/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "formats/gguf_reader.h"

namespace rapide {
namespace {

constexpr uint32_t kVersion = 3;

template <typename T>
void put(const std::function<void(const void*, size_t)>& sink, T value) {
  sink(&value, sizeof(T));
}

void put_string(const std::function<void(const void*, size_t)>& sink, const std::string& s) {
  put<uint64_t>(sink, s.size());
  sink(s.data(), s.size());
}

void put_value(const std::function<void(const void*, size_t)>& sink, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8:
      return put<uint8_t>(sink, static_cast<uint8_t>(std::get<uint64_t>(v.data)));
    case GgufType::kI8:
      return put<int8_t>(sink, static_cast<int8_t>(std::get<int64_t>(v.data)));
    case GgufType::kU16:
      return put<uint16_t>(sink, static_cast<uint16_t>(std::get<uint64_t>(v.data)));
    case GgufType::kI16:
      return put<int16_t>(sink, static_cast<int16_t>(std::get<int64_t>(v.data)));
    case GgufType::kU32:
      return put<uint32_t>(sink, static_cast<uint32_t>(std::get<uint64_t>(v.data)));
    case GgufType::kI32:
      return put<int32_t>(sink, static_cast<int32_t>(std::get<int64_t>(v.data)));
    case GgufType::kU64:
      return put<uint64_t>(sink, std::get<uint64_t>(v.data));
    case GgufType::kI64:
      return put<int64_t>(sink, std::get<int64_t>(v.data));
    case GgufType::kF32:
      return put<float>(sink, static_cast<float>(std::get<double>(v.data)));
    case GgufType::kF64:
      return put<double>(sink, std::get<double>(v.data));
    case GgufType::kBool:
      return put<uint8_t>(sink, std::get<bool>(v.data) ? 1 : 0);
    case GgufType::kString:
      return put_string(sink, v.as_string());
    case GgufType::kArray: {
      const GgufArray& a = v.as_array();
      put<uint32_t>(sink, static_cast<uint32_t>(a.element_type));
      put<uint64_t>(sink, a.items.size());
      for (const GgufValue& item : a.items) put_value(sink, item);
      return;
    }
  }
}

void put_zeros(const std::function<void(const void*, size_t)>& sink, size_t n) {
  static const uint8_t kZeros[256] = {};
  while (n > 0) {
    const size_t chunk = n < sizeof(kZeros) ? n : sizeof(kZeros);
    sink(kZeros, chunk);
    n -= chunk;
  }
}

uint64_t padding(uint64_t offset, uint32_t alignment) {
  return (alignment - offset % alignment) % alignment;
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  if (key == "general.alignment") {
    const auto* a = std::get_if<uint64_t>(&value.data);
    if (value.type != GgufType::kU32 || *a == 0 || (*a & (*a - 1)) != 0) {
      fail(ErrorCode::kInvalidArgument, "general.alignment must be a u32 power of two");
    }
  }
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

const GgufValue* GgufWriter::find(const std::string& key) const {
  for (const auto& [k, v] : metadata_) {
    if (k == key) return &v;
  }
  return nullptr;
}

uint32_t GgufWriter::alignment() const {
  const GgufValue* a = find("general.alignment");
  return a ? static_cast<uint32_t>(std::get<uint64_t>(a->data)) : kGgufDefaultAlignment;
}

size_t GgufWriter::check_tensor(const std::string& name, TensorType type,
                                const std::vector<int64_t>& shape) {
  if (name.empty()) fail(ErrorCode::kInvalidArgument, "GGUF tensor with an empty name");
  for (const Tensor& t : tensors_) {
    if (t.name == name) fail(ErrorCode::kInvalidArgument, "duplicate GGUF tensor '{}'", name);
  }
  if (shape.empty() || shape.size() > 4) {
    fail(ErrorCode::kInvalidArgument, "GGUF tensor '{}' has {} dimensions (1 to 4 allowed)", name,
         shape.size());
  }
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d <= 0 || __builtin_mul_overflow(elements, d, &elements)) {
      fail(ErrorCode::kInvalidArgument, "GGUF tensor '{}' has an invalid dimension {}", name, d);
    }
  }
  const int64_t row = tensor_row_bytes(type, shape[0]);  // checks the block multiple
  return static_cast<size_t>(row * (elements / shape[0]));
}

void GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                            const void* data, size_t size_bytes) {
  const size_t expected = check_tensor(name, type, shape);
  if (size_bytes != expected) {
    fail(ErrorCode::kInvalidArgument, "GGUF tensor '{}' given {} bytes, its shape needs {}", name,
         size_bytes, expected);
  }
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back(
      {name, type, std::move(shape), expected, std::vector<uint8_t>(p, p + expected), {}});
}

void GgufWriter::add_tensor(const std::string& name, TensorType type, std::vector<int64_t> shape,
                            Fill fill) {
  const size_t expected = check_tensor(name, type, shape);
  tensors_.push_back({name, type, std::move(shape), expected, {}, std::move(fill)});
}

uint64_t GgufWriter::tensor_data_bytes() const {
  uint64_t total = 0;
  for (const Tensor& t : tensors_) total += t.size_bytes;
  return total;
}

void GgufWriter::emit(const Sink& sink, const Progress& progress) const {
  uint64_t written = 0;
  const Sink counted = [&](const void* data, size_t size) {
    sink(data, size);
    written += size;
  };
  const uint32_t align = alignment();
  put<uint32_t>(counted, kGgufMagic);
  put<uint32_t>(counted, kVersion);
  put<uint64_t>(counted, tensors_.size());
  put<uint64_t>(counted, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    put_string(counted, key);
    put<uint32_t>(counted, static_cast<uint32_t>(value.type));
    put_value(counted, value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(counted, t.name);
    put<uint32_t>(counted, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put<uint64_t>(counted, static_cast<uint64_t>(d));
    put<uint32_t>(counted, static_cast<uint32_t>(t.type));
    put<uint64_t>(counted, offset);
    offset += t.size_bytes + padding(t.size_bytes, align);
  }
  if (tensors_.empty()) return;
  put_zeros(counted, padding(written, align));
  std::vector<uint8_t> buffer;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    if (t.fill) {
      buffer.assign(t.size_bytes, 0);
      t.fill(buffer.data());
      counted(buffer.data(), buffer.size());
    } else {
      counted(t.bytes.data(), t.bytes.size());
    }
    put_zeros(counted, padding(t.size_bytes, align));
    if (progress) progress(i + 1, tensors_.size());
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  emit(
      [&](const void* data, size_t size) {
        const auto* p = static_cast<const uint8_t*>(data);
        out.insert(out.end(), p, p + size);
      },
      {});
  return out;
}

void GgufWriter::write(const std::string& path, const Progress& progress) const {
  const std::string temp = path + ".tmp";
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::vector<char> io_buffer(1 << 20);  // declared first: it must outlive the FILE
  std::unique_ptr<std::FILE, Closer> file(std::fopen(temp.c_str(), "wb"));
  if (!file) fail(ErrorCode::kUnavailable, "cannot create '{}': {}", temp, std::strerror(errno));
  std::setvbuf(file.get(), io_buffer.data(), _IOFBF, io_buffer.size());
  try {
    emit(
        [&](const void* data, size_t size) {
          if (size != 0 && std::fwrite(data, 1, size, file.get()) != size) {
            fail(ErrorCode::kUnavailable, "cannot write '{}': {}", temp, std::strerror(errno));
          }
        },
        progress);
    if (std::fclose(file.release()) != 0) {
      fail(ErrorCode::kUnavailable, "cannot write '{}': {}", temp, std::strerror(errno));
    }
  } catch (...) {
    file.reset();
    std::remove(temp.c_str());
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) fail(ErrorCode::kUnavailable, "cannot rename '{}' to '{}': {}", temp, path, ec.message());
}

}  // namespace rapide
