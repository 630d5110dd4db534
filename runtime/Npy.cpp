//===- Npy.cpp - NumPy .npy files -----------------------------------------===//

#include "seqc/Npy.h"

#include "FileIO.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace seqc;

namespace {

/// A cursor over the header dictionary, e.g.
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
public:
  HeaderParser(const std::string &text) : s(text) {}

  void skipSpace() {
    while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos])))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < s.size() && s[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skipSpace();
    return pos < s.size() && s[pos] == c;
  }
  bool parseString(std::string &out) {
    skipSpace();
    if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"'))
      return false;
    char quote = s[pos++];
    size_t end = s.find(quote, pos);
    if (end == std::string::npos)
      return false;
    out = s.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool parseWord(std::string &out) {
    skipSpace();
    size_t start = pos;
    while (pos < s.size() && std::isalpha(static_cast<unsigned char>(s[pos])))
      ++pos;
    out = s.substr(start, pos - start);
    return !out.empty();
  }
  bool parseInt(int64_t &out) {
    skipSpace();
    size_t start = pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos])))
      ++pos;
    if (start == pos || pos - start > 18)
      return false;
    out = std::stoll(s.substr(start, pos - start));
    // Python may write 3L in old files.
    if (pos < s.size() && s[pos] == 'L')
      ++pos;
    return true;
  }
  bool atEnd() {
    skipSpace();
    return pos == s.size();
  }

private:
  const std::string &s;
  size_t pos = 0;
};

struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

Status parseHeader(const std::string &text, Header &h,
                   const std::string &what) {
  auto bad = [&](const std::string &why) {
    return Status::error(what + ": malformed .npy header: " + why);
  };
  HeaderParser p(text);
  if (!p.consume('{'))
    return bad("expected '{'");
  bool haveDescr = false, haveOrder = false, haveShape = false;
  while (!p.consume('}')) {
    std::string key;
    if (!p.parseString(key))
      return bad("expected a quoted key");
    if (!p.consume(':'))
      return bad("expected ':' after '" + key + "'");
    if (key == "descr") {
      if (!p.parseString(h.descr))
        return bad("descr must be a string");
      haveDescr = true;
    } else if (key == "fortran_order") {
      std::string word;
      if (!p.parseWord(word) || (word != "True" && word != "False"))
        return bad("fortran_order must be True or False");
      h.fortran = word == "True";
      haveOrder = true;
    } else if (key == "shape") {
      if (!p.consume('('))
        return bad("shape must be a tuple");
      while (!p.consume(')')) {
        int64_t d;
        if (!p.parseInt(d))
          return bad("shape entries must be non-negative integers");
        h.shape.push_back(d);
        if (h.shape.size() > 32)
          return bad("more than 32 dimensions");
        if (!p.consume(',') && !p.peek(')'))
          return bad("expected ',' or ')' in shape");
      }
      haveShape = true;
    } else {
      return bad("unexpected key '" + key + "'");
    }
    if (!p.consume(',') && !p.peek('}'))
      return bad("expected ',' or '}'");
  }
  if (!haveDescr || !haveOrder || !haveShape)
    return bad("needs descr, fortran_order and shape");
  return Status::ok();
}

std::optional<DType> dtypeFromDescr(const std::string &d) {
  if (d == "<f4")
    return DType::F32;
  if (d == "<f2")
    return DType::F16;
  if (d == "<i4")
    return DType::I32;
  if (d == "<i8")
    return DType::I64;
  return std::nullopt;
}

} // namespace

Expected<Tensor> npy::parse(const void *data, size_t size,
                            const std::string &what) {
  const auto *bytes = static_cast<const unsigned char *>(data);
  static const unsigned char magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (size < 10 || std::memcmp(bytes, magic, 6) != 0)
    return Status::error(what + ": not a .npy file (bad magic)");
  unsigned major = bytes[6];
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = bytes[8] | (bytes[9] << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return Status::error(what + ": truncated .npy header");
    headerLen = static_cast<size_t>(bytes[8]) | (bytes[9] << 8) |
                (static_cast<size_t>(bytes[10]) << 16) |
                (static_cast<size_t>(bytes[11]) << 24);
    offset = 12;
  } else {
    return Status::error(what + ": unsupported .npy version " +
                         std::to_string(major) + "." +
                         std::to_string(bytes[7]));
  }
  if (headerLen > size - offset)
    return Status::error(what + ": truncated .npy header");
  std::string text(reinterpret_cast<const char *>(bytes + offset), headerLen);
  Header h;
  if (Status s = parseHeader(text, h, what); !s)
    return s;
  std::optional<DType> dtype = dtypeFromDescr(h.descr);
  if (!dtype)
    return Status::error(what + ": unsupported element type '" + h.descr +
                         "' (seqc reads little-endian <f4, <f2, <i4, <i8)");
  if (h.fortran)
    return Status::error(what + ": Fortran-order arrays are not supported "
                                "(save with np.ascontiguousarray)");
  std::optional<int64_t> n = checkedNumel(h.shape);
  size_t elt = dtypeSize(*dtype);
  if (!n || static_cast<uint64_t>(*n) > SIZE_MAX / elt)
    return Status::error(what + ": shape is too large");
  size_t dataBytes = static_cast<size_t>(*n) * elt;
  size_t available = size - offset - headerLen;
  if (available != dataBytes)
    return Status::error(what + ": expected " + std::to_string(dataBytes) +
                         " bytes of data for the shape in its header, found " +
                         std::to_string(available));
  Expected<Tensor> t = Tensor::zeros(*dtype, h.shape);
  if (!t)
    return Status::error(what + ": " + t.message());
  if (dataBytes)
    std::memcpy(t->data(), bytes + offset + headerLen, dataBytes);
  return t;
}

Expected<Tensor> npy::read(const std::string &path) {
  Expected<std::string> bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  return parse(bytes->data(), bytes->size(), "'" + path + "'");
}

std::string npy::serialize(const Tensor &tensor) {
  std::string descr;
  Tensor widened;
  const Tensor *src = &tensor;
  switch (tensor.dtype()) {
  case DType::F32:
    descr = "<f4";
    break;
  case DType::F16:
    descr = "<f2";
    break;
  case DType::I32:
    descr = "<i4";
    break;
  case DType::I64:
    descr = "<i8";
    break;
  case DType::BF16: {
    descr = "<f4";
    widened = *Tensor::zeros(DType::F32, tensor.shape());
    const auto *in = tensor.dataAs<uint16_t>();
    auto *out = widened.dataAs<float>();
    for (int64_t i = 0; i < tensor.numel(); ++i)
      out[i] = bf16ToFloat(in[i]);
    src = &widened;
    break;
  }
  }
  std::string shape = "(";
  for (int64_t d : tensor.shape())
    shape += std::to_string(d) + ", ";
  if (tensor.rank() > 1)
    shape.resize(shape.size() - 1), shape.back() = ')';
  else if (tensor.rank() == 1)
    shape.pop_back(), shape += ")";
  else
    shape += ")";
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts on a 64-byte boundary; the header ends in '\n'.
  size_t total = 10 + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>((dict.size() >> 8) & 0xff));
  out += dict;
  out.append(static_cast<const char *>(src->data()), src->byteSize());
  return out;
}

Status npy::write(const std::string &path, const Tensor &tensor) {
  return writeFileAtomically(path, serialize(tensor));
}
