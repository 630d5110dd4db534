//===- Weights.cpp - named tensors from .safetensors and .npz files -------===//

#include "seqc/Weights.h"

#include "seqc/Npy.h"

#include "FileIO.h" // runtime/

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <zlib.h>

using namespace seqc;
using namespace seqc::weights;

namespace {

//===----------------------------------------------------------------------===//
// A small, strict JSON reader for safetensors headers
//===----------------------------------------------------------------------===//

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  std::string text; // String, or the digits of a Number
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
};

class JsonParser {
public:
  explicit JsonParser(const std::string &s) : s(s) {}

  /// Parses one value; on failure `error` says what and where.
  bool parse(Json &out, int depth = 0) {
    skip();
    if (depth > 64)
      return fail("nesting too deep");
    if (pos >= s.size())
      return fail("unexpected end");
    char c = s[pos];
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = Json::String;
      return parseString(out.text);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    for (auto [word, kind, value] : {std::tuple{"true", Json::Bool, true},
                                     {"false", Json::Bool, false},
                                     {"null", Json::Null, false}}) {
      size_t n = std::strlen(word);
      if (s.compare(pos, n, word) == 0) {
        pos += n;
        out.kind = kind;
        out.boolean = value;
        return true;
      }
    }
    return fail("unexpected character");
  }

  bool atEnd() {
    skip();
    return pos == s.size();
  }
  const std::string &error() const { return err; }

private:
  bool fail(const std::string &why) {
    if (err.empty())
      err = why + " at byte " + std::to_string(pos);
    return false;
  }
  void skip() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' ||
                              s[pos] == '\n' || s[pos] == '\r'))
      ++pos;
  }
  bool expect(char c) {
    skip();
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return fail(std::string("expected '") + c + "'");
  }
  bool parseObject(Json &out, int depth) {
    out.kind = Json::Object;
    ++pos;
    skip();
    if (pos < s.size() && s[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skip();
      std::string key;
      if (pos >= s.size() || s[pos] != '"')
        return fail("expected a string key");
      if (!parseString(key) || !expect(':'))
        return false;
      Json value;
      if (!parse(value, depth + 1))
        return false;
      out.members.emplace_back(std::move(key), std::move(value));
      skip();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      return expect('}');
    }
  }
  bool parseArray(Json &out, int depth) {
    out.kind = Json::Array;
    ++pos;
    skip();
    if (pos < s.size() && s[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      Json value;
      if (!parse(value, depth + 1))
        return false;
      out.items.push_back(std::move(value));
      skip();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      return expect(']');
    }
  }
  bool parseString(std::string &out) {
    ++pos; // the opening quote
    while (pos < s.size() && s[pos] != '"') {
      unsigned char c = s[pos];
      if (c < 0x20)
        return fail("control character in a string");
      if (c != '\\') {
        out.push_back(static_cast<char>(c));
        ++pos;
        continue;
      }
      if (++pos >= s.size())
        return fail("unfinished escape");
      char e = s[pos++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out.push_back(e);
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'u': {
        if (pos + 4 > s.size())
          return fail("short \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
          char h = s[pos++];
          code <<= 4;
          if (h >= '0' && h <= '9')
            code |= h - '0';
          else if (h >= 'a' && h <= 'f')
            code |= h - 'a' + 10;
          else if (h >= 'A' && h <= 'F')
            code |= h - 'A' + 10;
          else
            return fail("bad \\u escape");
        }
        // UTF-8 of the code unit (surrogate halves are kept as they are:
        // names only need to compare equal to themselves).
        if (code < 0x80) {
          out.push_back(static_cast<char>(code));
        } else if (code < 0x800) {
          out.push_back(static_cast<char>(0xC0 | (code >> 6)));
          out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
        } else {
          out.push_back(static_cast<char>(0xE0 | (code >> 12)));
          out.push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
          out.push_back(static_cast<char>(0x80 | (code & 0x3F)));
        }
        break;
      }
      default:
        return fail("bad escape");
      }
    }
    if (pos >= s.size())
      return fail("unterminated string");
    ++pos;
    return true;
  }
  bool parseNumber(Json &out) {
    out.kind = Json::Number;
    size_t start = pos;
    if (s[pos] == '-')
      ++pos;
    while (pos < s.size() &&
           (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.' ||
            s[pos] == 'e' || s[pos] == 'E' || s[pos] == '+' || s[pos] == '-'))
      ++pos;
    out.text = s.substr(start, pos - start);
    if (out.text == "-")
      return fail("bad number");
    return true;
  }

  const std::string &s;
  size_t pos = 0;
  std::string err;
};

/// A non-negative integer JSON number that fits in int64.
bool toIndex(const Json &j, int64_t &out) {
  if (j.kind != Json::Number || j.text.empty() || j.text.size() > 18)
    return false;
  for (char c : j.text)
    if (c < '0' || c > '9')
      return false;
  out = std::stoll(j.text);
  return true;
}

std::optional<DType> safetensorsDType(const std::string &d) {
  if (d == "F32")
    return DType::F32;
  if (d == "F16")
    return DType::F16;
  if (d == "BF16")
    return DType::BF16;
  if (d == "I32")
    return DType::I32;
  if (d == "I64")
    return DType::I64;
  return std::nullopt;
}

const char *safetensorsName(DType d) {
  switch (d) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return "F32";
}

uint64_t readLE(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

void appendLE(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

Status checkDistinct(const std::vector<NamedTensor> &tensors,
                     const std::string &what) {
  std::set<std::string> seen;
  for (const NamedTensor &t : tensors)
    if (!seen.insert(t.name).second)
      return Status::error(what + ": tensor '" + t.name + "' appears twice");
  return Status::ok();
}

} // namespace

//===----------------------------------------------------------------------===//
// .safetensors
//===----------------------------------------------------------------------===//

namespace {

/// The error of a file that is not what its format says: "<what>:
/// malformed <format> file: <why>".
struct Malformed {
  const std::string &what;
  const char *format;
  Status operator()(const std::string &why) const {
    return Status::error(what + ": malformed " + format + " file: " + why);
  }
};

/// One tensor of a safetensors header: its element type, shape and the byte
/// range of its data in the payload.
struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;
};

/// The value of `key` in a JSON object, or null.
const Json *member(const Json &object, const char *key) {
  for (const auto &[k, v] : object.members)
    if (k == key)
      return &v;
  return nullptr;
}

/// The header's entry `name`, checked against itself and a payload of
/// `payloadSize` bytes.
Expected<SafetensorsEntry> parseSafetensorsEntry(const std::string &name,
                                                 const Json &info,
                                                 size_t payloadSize,
                                                 const Malformed &bad) {
  if (info.kind != Json::Object)
    return bad("entry '" + name + "' is not an object");
  const Json *dt = member(info, "dtype"), *shape = member(info, "shape"),
             *offsets = member(info, "data_offsets");
  if (!dt || dt->kind != Json::String)
    return bad("tensor '" + name + "' has no dtype string");
  std::optional<DType> dtype = safetensorsDType(dt->text);
  if (!dtype)
    return Status::error(bad.what + ": tensor '" + name +
                         "' has element type " + dt->text +
                         ", which seqc does not take (F32, F16, BF16, I32, "
                         "I64)");
  if (!shape || shape->kind != Json::Array || shape->items.size() > 32)
    return bad("tensor '" + name + "' has no valid shape");
  SafetensorsEntry e{name, *dtype, {}, 0, 0};
  for (const Json &d : shape->items) {
    int64_t v;
    if (!toIndex(d, v))
      return bad("tensor '" + name +
                 "' has a shape entry that is not a non-negative integer");
    e.shape.push_back(v);
  }
  if (!offsets || offsets->kind != Json::Array || offsets->items.size() != 2 ||
      !toIndex(offsets->items[0], e.begin) ||
      !toIndex(offsets->items[1], e.end) || e.end < e.begin)
    return bad("tensor '" + name + "' has invalid data_offsets");
  std::optional<int64_t> n = checkedNumel(e.shape);
  size_t elt = dtypeSize(e.dtype);
  if (!n || static_cast<uint64_t>(*n) > SIZE_MAX / elt)
    return bad("tensor '" + name + "' is too large");
  if (static_cast<uint64_t>(e.end) > payloadSize)
    return bad("tensor '" + name + "' ends at byte " + std::to_string(e.end) +
               " of the data, which has " + std::to_string(payloadSize));
  uint64_t needed = static_cast<uint64_t>(*n) * elt;
  if (static_cast<uint64_t>(e.end - e.begin) != needed)
    return bad("tensor '" + name + "' has " + std::to_string(e.end - e.begin) +
               " bytes of data but its shape needs " + std::to_string(needed));
  return e;
}

} // namespace

Expected<std::vector<NamedTensor>>
weights::parseSafetensors(const void *data, size_t size,
                          const std::string &what) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  Malformed bad{what, ".safetensors"};
  if (size < 8)
    return bad("shorter than its 8-byte header length");
  uint64_t headerLen = readLE(bytes, 8);
  if (headerLen > size - 8)
    return bad("header length " + std::to_string(headerLen) +
               " exceeds the file size " + std::to_string(size));
  std::string header(reinterpret_cast<const char *>(bytes + 8), headerLen);
  JsonParser parser(header);
  Json root;
  if (!parser.parse(root))
    return bad("header is not JSON (" + parser.error() + ")");
  if (!parser.atEnd())
    return bad("text after the JSON header");
  if (root.kind != Json::Object)
    return bad("header is not a JSON object");
  const unsigned char *payload = bytes + 8 + headerLen;
  size_t payloadSize = size - 8 - headerLen;

  std::vector<SafetensorsEntry> entries;
  std::set<std::string> names;
  for (const auto &[name, info] : root.members) {
    if (name == "__metadata__")
      continue; // free-form strings
    if (!names.insert(name).second)
      return bad("tensor '" + name + "' appears twice");
    Expected<SafetensorsEntry> entry =
        parseSafetensorsEntry(name, info, payloadSize, bad);
    if (!entry)
      return entry.status();
    entries.push_back(entry.take());
  }
  // The data of different tensors must not overlap.
  std::sort(entries.begin(), entries.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
              return a.begin < b.begin;
            });
  for (size_t i = 1; i < entries.size(); ++i)
    if (entries[i].begin < entries[i - 1].end)
      return bad("the data of '" + entries[i - 1].name + "' and '" +
                 entries[i].name + "' overlap");

  std::vector<NamedTensor> out;
  for (const SafetensorsEntry &e : entries) {
    Expected<Tensor> t = Tensor::zeros(e.dtype, e.shape);
    if (!t)
      return Status::error(what + ": tensor '" + e.name + "': " + t.message());
    if (e.end > e.begin)
      std::memcpy(t->data(), payload + e.begin, e.end - e.begin);
    out.push_back({e.name, t.take()});
  }
  return out;
}

Expected<std::string>
weights::serializeSafetensors(const std::vector<NamedTensor> &tensors) {
  if (Status s = checkDistinct(tensors, "safetensors"); !s)
    return s;
  std::string json = "{";
  uint64_t offset = 0;
  for (const NamedTensor &t : tensors) {
    if (t.name == "__metadata__")
      return Status::error("a tensor cannot be named __metadata__");
    // A JSON string: quotes, backslashes and control characters escaped.
    std::string name;
    for (char c : t.name) {
      if (c == '"' || c == '\\') {
        name.push_back('\\');
        name.push_back(c);
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "\\u%04x", static_cast<unsigned>(c));
        name += hex;
      } else {
        name.push_back(c);
      }
    }
    std::string shape;
    for (int64_t d : t.tensor.shape())
      shape += (shape.empty() ? "" : ",") + std::to_string(d);
    uint64_t end = offset + t.tensor.byteSize();
    json += (json.size() > 1 ? "," : "") + std::string("\"") + name +
            "\":{\"dtype\":\"" + safetensorsName(t.tensor.dtype()) +
            "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
            std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  json += "}";
  // Pad the header with spaces so the data starts 8-byte aligned.
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out;
  appendLE(out, json.size(), 8);
  out += json;
  for (const NamedTensor &t : tensors)
    out.append(static_cast<const char *>(t.tensor.data()), t.tensor.byteSize());
  return out;
}

Status weights::writeSafetensors(const std::string &path,
                                 const std::vector<NamedTensor> &tensors) {
  Expected<std::string> bytes = serializeSafetensors(tensors);
  if (!bytes)
    return Status::error("cannot write '" + path + "': " + bytes.message());
  return writeFileAtomically(path, *bytes);
}

//===----------------------------------------------------------------------===//
// .npz (a zip archive of .npy members)
//===----------------------------------------------------------------------===//

namespace {

/// Where a zip archive's central directory lies, and its entries' number.
struct ZipDirectory {
  uint64_t count = 0, size = 0, offset = 0;
};

/// The central directory, from the end-of-central-directory record (22
/// bytes and a comment of up to 64 KiB, found by scanning back from the
/// end) or, for zip64, the record its locator points at.
Expected<ZipDirectory> findZipDirectory(const unsigned char *bytes, size_t size,
                                        const Malformed &bad) {
  if (size < 22)
    return bad("too short for a zip archive");
  size_t eocd = SIZE_MAX;
  size_t lowest = size >= 22 + 65535 ? size - 22 - 65535 : 0;
  for (size_t p = size - 22 + 1; p-- > lowest;)
    if (readLE(bytes + p, 4) == 0x06054b50) {
      eocd = p;
      break;
    }
  if (eocd == SIZE_MAX)
    return bad("no end-of-central-directory record");
  ZipDirectory dir{readLE(bytes + eocd + 10, 2), readLE(bytes + eocd + 12, 4),
                   readLE(bytes + eocd + 16, 4)};
  // Zip64: the real values are in the zip64 end record, located by the
  // locator just before the classic record.
  if (dir.count == 0xFFFF || dir.size == 0xFFFFFFFF ||
      dir.offset == 0xFFFFFFFF) {
    if (eocd < 20 || readLE(bytes + eocd - 20, 4) != 0x07064b50)
      return bad("zip64 archive without a zip64 locator");
    uint64_t rec = readLE(bytes + eocd - 20 + 8, 8);
    if (rec > size || size - rec < 56 || readLE(bytes + rec, 4) != 0x06064b50)
      return bad("invalid zip64 end record");
    dir = {readLE(bytes + rec + 32, 8), readLE(bytes + rec + 40, 8),
           readLE(bytes + rec + 48, 8)};
  }
  if (dir.offset > size || dir.size > size - dir.offset)
    return bad("central directory lies outside the file");
  return dir;
}

/// A member of a zip archive as its central directory entry describes it.
struct ZipMember {
  std::string name;
  unsigned flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t compressedSize = 0, size = 0, localHeader = 0;
};

/// The sizes and local header offset a zip64 extra field holds: each of
/// the entry's fields that read 0xFFFFFFFF, in order.
Status applyZip64Extra(ZipMember &m, const unsigned char *extra,
                       size_t extraLen, const Malformed &bad) {
  for (size_t e = 0; e + 4 <= extraLen;) {
    unsigned id = readLE(extra + e, 2), len = readLE(extra + e + 2, 2);
    if (e + 4 + len > extraLen)
      break;
    if (id == 0x0001) {
      size_t q = e + 4;
      for (uint64_t *field : {&m.size, &m.compressedSize, &m.localHeader})
        if (*field == 0xFFFFFFFF) {
          if (q + 8 > e + 4 + len)
            return bad("short zip64 field for '" + m.name + "'");
          *field = readLE(extra + q, 8);
          q += 8;
        }
    }
    e += 4 + len;
  }
  return Status::ok();
}

/// Central directory entry `index` at `p` (before `dirEnd`); advances `p`
/// past it.
Expected<ZipMember> readZipEntry(const unsigned char *bytes, size_t &p,
                                 size_t dirEnd, uint64_t index,
                                 const Malformed &bad) {
  if (p > dirEnd || dirEnd - p < 46 || readLE(bytes + p, 4) != 0x02014b50)
    return bad("corrupt central directory entry " + std::to_string(index));
  ZipMember m;
  m.flags = readLE(bytes + p + 8, 2);
  m.method = readLE(bytes + p + 10, 2);
  m.crc = readLE(bytes + p + 16, 4);
  m.compressedSize = readLE(bytes + p + 20, 4);
  m.size = readLE(bytes + p + 24, 4);
  size_t nameLen = readLE(bytes + p + 28, 2);
  size_t extraLen = readLE(bytes + p + 30, 2);
  size_t commentLen = readLE(bytes + p + 32, 2);
  m.localHeader = readLE(bytes + p + 42, 4);
  if (dirEnd - p - 46 < nameLen + extraLen + commentLen)
    return bad("corrupt central directory entry " + std::to_string(index));
  m.name.assign(reinterpret_cast<const char *>(bytes + p + 46), nameLen);
  if (Status s = applyZip64Extra(m, bytes + p + 46 + nameLen, extraLen, bad);
      !s)
    return s;
  p += 46 + nameLen + extraLen + commentLen;
  return m;
}

/// How inflating a member ended.
enum class Inflated { Whole, CannotStart, WrongSize };

/// `compressedSize` deflated bytes at `in` inflated into `out` (sized).
Inflated inflateRaw(const unsigned char *in, uint64_t compressedSize,
                    std::string &out) {
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
    return Inflated::CannotStart;
  zs.next_in = const_cast<Bytef *>(in);
  zs.avail_in =
      static_cast<uInt>(std::min<uint64_t>(compressedSize, UINT32_MAX));
  zs.next_out = reinterpret_cast<Bytef *>(out.data());
  zs.avail_out = static_cast<uInt>(std::min<uint64_t>(out.size(), UINT32_MAX));
  int rc = inflate(&zs, Z_FINISH);
  uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  return rc == Z_STREAM_END && produced == out.size() ? Inflated::Whole
                                                      : Inflated::WrongSize;
}

/// The CRC-32 of `data`, in pieces zlib's `uInt` can count.
uint32_t crc32Of(const std::string &data) {
  uLong sum = crc32(0L, Z_NULL, 0);
  for (size_t off = 0; off < data.size(); off += 1u << 30) {
    size_t n = std::min<size_t>(data.size() - off, 1u << 30);
    sum = crc32(sum, reinterpret_cast<const Bytef *>(data.data() + off),
                static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(sum);
}

/// A member's bytes, stored or deflated, checked against its sizes and
/// CRC-32.
Expected<std::string> extractZipMember(const unsigned char *bytes, size_t size,
                                       const ZipMember &m,
                                       const Malformed &bad) {
  const std::string &what = bad.what;
  if (m.flags & 1)
    return Status::error(what + ": member '" + m.name + "' is encrypted");
  uint64_t local = m.localHeader;
  if (local > size || size - local < 30 ||
      readLE(bytes + local, 4) != 0x04034b50)
    return bad("member '" + m.name + "' has no local header");
  size_t dataStart = local + 30 + readLE(bytes + local + 26, 2) +
                     readLE(bytes + local + 28, 2);
  if (dataStart > size || m.compressedSize > size - dataStart)
    return bad("member '" + m.name + "' extends past the end of the file");
  // Deflate expands at most ~1032:1: a larger claim is a corrupt (or
  // hostile) header, refused before anything that size is allocated.
  if (m.size > m.compressedSize * 1032 + 1024)
    return bad("member '" + m.name + "' claims " + std::to_string(m.size) +
               " bytes from " + std::to_string(m.compressedSize) +
               " compressed");
  std::string raw;
  if (m.method == 0) {
    if (m.compressedSize != m.size)
      return bad("stored member '" + m.name + "' has two sizes");
    raw.assign(reinterpret_cast<const char *>(bytes + dataStart), m.size);
  } else if (m.method == 8) {
    raw.resize(m.size);
    Inflated inflated = inflateRaw(bytes + dataStart, m.compressedSize, raw);
    if (inflated == Inflated::CannotStart)
      return Status::error(what + ": cannot start inflating '" + m.name + "'");
    if (inflated == Inflated::WrongSize)
      return bad("member '" + m.name + "' does not inflate to its size");
  } else {
    return Status::error(
        what + ": member '" + m.name + "' uses zip compression method " +
        std::to_string(m.method) + " (seqc reads stored and deflated members)");
  }
  if (crc32Of(raw) != m.crc)
    return bad("member '" + m.name + "' fails its CRC-32 check");
  return raw;
}

} // namespace

Expected<std::vector<NamedTensor>>
weights::parseNpz(const void *data, size_t size, const std::string &what) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  Malformed bad{what, ".npz"};
  Expected<ZipDirectory> dir = findZipDirectory(bytes, size, bad);
  if (!dir)
    return dir.status();
  std::vector<NamedTensor> out;
  size_t p = dir->offset, dirEnd = dir->offset + dir->size;
  for (uint64_t i = 0; i < dir->count; ++i) {
    Expected<ZipMember> m = readZipEntry(bytes, p, dirEnd, i, bad);
    if (!m)
      return m.status();
    Expected<std::string> raw = extractZipMember(bytes, size, *m, bad);
    if (!raw)
      return raw.status();
    const std::string &name = m->name;
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0)
      return Status::error(what + ": member '" + name +
                           "' is not a .npy array");
    Expected<Tensor> t =
        npy::parse(raw->data(), raw->size(), "'" + name + "' in " + what);
    if (!t)
      return t.status();
    out.push_back({name.substr(0, name.size() - 4), t.take()});
  }
  if (Status s = checkDistinct(out, what); !s)
    return s;
  return out;
}

Expected<std::vector<NamedTensor>> weights::read(const std::string &path) {
  Expected<std::string> bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  std::string what = "'" + path + "'";
  if (bytes->size() >= 4 && bytes->compare(0, 4, "PK\x03\x04", 4) == 0)
    return parseNpz(bytes->data(), bytes->size(), what);
  if (bytes->size() >= 4 && bytes->compare(0, 4, "PK\x05\x06", 4) == 0)
    return parseNpz(bytes->data(), bytes->size(), what); // an empty archive
  if (bytes->size() >= 6 && bytes->compare(0, 6, "\x93NUMPY", 6) == 0)
    return Status::error(
        what + " is a .npy file (one unnamed array), not a file of named "
               "tensors (.safetensors or .npz): bind it to an argument with "
               "--input, or store it by name with numpy.savez");
  return parseSafetensors(bytes->data(), bytes->size(), what);
}
