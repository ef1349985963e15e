// The safetensors format: round trips, its byte layout, malformed files. Plain files:
// test_files.cpp.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "io_support.h"
#include "rosetta/core/io.h"
#include "rosetta/core/safetensors.h"

namespace {

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = char((v >> (8 * i)) & 0xFF);
  return s;
}

// A safetensors file from a hand-written header and data section.
std::string make_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

template <class T>
std::string raw_bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// The raw bytes of a tensor's elements in row-major order (compares NaN and -0.0 exactly).
std::string tensor_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const size_t n = size_t(c.numel()) * dtype_size(c.dtype());
  const char* base = static_cast<const char*>(c.storage()->data());
  return std::string(base + c.offset() * dtype_size(c.dtype()), n);
}

}  // namespace

// ------------------------------------------------------------------ safetensors: round trips

TEST_CASE("safetensors round trip of every dtype, scalars, empty and strided tensors", "[io]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor base = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor transposed = base.transpose(0, 1);  // (3, 2), non-contiguous
  REQUIRE_FALSE(transposed.is_contiguous());
  const Tensor strided = Tensor::arange(10, DType::f64).slice(0, 1, 10, 3);  // 1, 4, 7
  REQUIRE_FALSE(strided.is_contiguous());

  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", Tensor::from_vector<float>({1.5f, -0.0f, nan, inf, -inf, 1e-40f}, {2, 3})},
      {"f64", Tensor::from_vector<double>({3.141592653589793, -1e300, 5e-324}, {3})},
      {"i32", Tensor::from_vector<int32_t>({-2147483647 - 1, 0, 7, 2147483647}, {2, 1, 2})},
      {"scalar", Tensor::scalar(42.0, DType::f32)},
      {"empty", Tensor::zeros({0, 5}, DType::f32)},
      {"empty_i32", Tensor::zeros({0}, DType::i32)},
      {"transposed", transposed},
      {"strided", strided},
  };
  const std::string bytes = serialize_safetensors(tensors);
  const SafeTensors st = parse_safetensors(bytes, "round.safetensors");

  REQUIRE(st.tensors.size() == tensors.size());
  REQUIRE(st.metadata.empty());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO("tensor " << tensors[i].first);
    const auto& [name, t] = st.tensors[i];
    CHECK(name == tensors[i].first);  // file order is the order given to serialize
    CHECK(t.shape() == tensors[i].second.shape());
    CHECK(t.dtype() == tensors[i].second.dtype());
    CHECK(t.is_contiguous());
    CHECK(tensor_bytes(t) == tensor_bytes(tensors[i].second));  // bit-exact, NaN included
  }
  REQUIRE(st.find("transposed") != nullptr);
  CHECK(st.find("transposed")->to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
  CHECK(st.find("strided")->to_vector<double>() == std::vector<double>{1, 4, 7});
  CHECK(st.find("scalar")->dim() == 0);
  CHECK(st.find("scalar")->item() == 42.0);
  CHECK(st.find("empty")->numel() == 0);
  CHECK(st.find("missing") == nullptr);
}

TEST_CASE("safetensors metadata round trip and file save/load", "[io]") {
  ScratchDir dir;
  const std::string path = dir.file("model.safetensors");
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"step", "1200"},
      {"note", "quotes \" and\nnewlines, ünïcödé"},
      {"", ""}};
  const Tensor w = Tensor::from_vector<float>({0.25f, -0.5f}, {1, 2});
  save_safetensors(path, {{"decoder.layers.0.w", w}}, metadata);
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});  // no temp file left

  const SafeTensors st = load_safetensors(path);
  CHECK(st.metadata == metadata);
  REQUIRE(st.tensors.size() == 1);
  CHECK(st.tensors[0].first == "decoder.layers.0.w");
  CHECK(st.tensors[0].second.to_vector<float>() == std::vector<float>{0.25f, -0.5f});

  // Saving again replaces the file.
  save_safetensors(path, {}, {});
  const SafeTensors empty = load_safetensors(path);
  CHECK(empty.tensors.empty());
  CHECK(empty.metadata.empty());
  CHECK(dir.listing() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("numbers in metadata are read whole, and errors name the file, key and value", "[io]") {
  const std::map<std::string, std::string> m = {
      {"step", "1200"}, {"neg", "-7"}, {"loss", "2.5"}, {"eps", "1e-05"},  {"best", "nan"},
      {"tail", "12abc"}, {"space", " 3"}, {"empty", ""},   {"huge", "99999999999999999999"}};
  CHECK(metadata_int(m, "step", "a.safetensors") == 1200);
  CHECK(metadata_int(m, "neg", "a.safetensors") == -7);
  CHECK(metadata_double(m, "loss", "a.safetensors") == 2.5);
  CHECK(metadata_double(m, "eps", "a.safetensors") == 1e-5);
  CHECK(metadata_double(m, "step", "a.safetensors") == 1200.0);
  CHECK(std::isnan(metadata_double(m, "best", "a.safetensors")));
  CHECK_THROWS_WITH(metadata_int(m, "loss", "a.safetensors"),
                    Contains("a.safetensors: loss = '2.5' is not an integer"));
  CHECK_THROWS_WITH(metadata_int(m, "tail", "a.safetensors"), Contains("tail = '12abc' is not an integer"));
  CHECK_THROWS_WITH(metadata_int(m, "space", "a.safetensors"), Contains("space = ' 3' is not an integer"));
  CHECK_THROWS_WITH(metadata_int(m, "huge", "a.safetensors"), Contains("huge = '99999999999999999999'"));
  CHECK_THROWS_WITH(metadata_double(m, "empty", "a.safetensors"), Contains("empty = '' is not a number"));
  CHECK_THROWS_WITH(metadata_double(m, "tail", "a.safetensors"), Contains("tail = '12abc' is not a number"));
  CHECK_THROWS_WITH(metadata_int(m, "steps", "a.safetensors"), Contains("a.safetensors has no steps"));
}

// ------------------------------------------------------------------ safetensors: byte layout

TEST_CASE("safetensors byte layout matches a hand-built file", "[io]") {
  const Tensor a = Tensor::from_vector<float>({1.0f, 2.0f}, {2});
  const Tensor b = Tensor::from_vector<int32_t>({7}, {1});
  const std::string bytes = serialize_safetensors({{"a", a}, {"b", b}}, {{"k", "v"}});

  std::string header =
      R"({"__metadata__":{"k":"v"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}})";
  while ((8 + header.size()) % 8 != 0) header += ' ';  // padded so the data is 8-byte aligned
  const std::string expected =
      le64(header.size()) + header + raw_bytes<float>({1.0f, 2.0f}) + raw_bytes<int32_t>({7});
  CHECK(bytes.size() == expected.size());
  CHECK(bytes == expected);
  CHECK((8 + header.size()) % 8 == 0);

  // A reader accepts other layouts: any key order, whitespace, no padding, floats at offsets
  // given out of header order.
  const std::string hand = make_file(
      "{ \"y\" : {\"data_offsets\": [8, 16], \"shape\": [], \"dtype\": \"F64\"},\n"
      "  \"x\": {\"shape\": [1, 2], \"dtype\": \"I32\", \"data_offsets\": [0, 8]} }",
      raw_bytes<int32_t>({-1, 3}) + raw_bytes<double>({0.5}));
  const SafeTensors st = parse_safetensors(hand, "hand.safetensors");
  REQUIRE(st.tensors.size() == 2);
  CHECK(st.tensors[0].first == "x");  // in data order
  CHECK(st.tensors[0].second.shape() == Shape{1, 2});
  CHECK(st.tensors[0].second.to_vector<int32_t>() == std::vector<int32_t>{-1, 3});
  CHECK(st.tensors[1].first == "y");
  CHECK(st.tensors[1].second.dim() == 0);
  CHECK(st.tensors[1].second.dtype() == DType::f64);
  CHECK(st.tensors[1].second.item() == 0.5);
}

TEST_CASE("safetensors keeps empty tensors at the same offset in header order", "[io]") {
  const std::string hand = make_file(
      R"({"e2":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
      R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("e1":{"dtype":"F32","shape":[2,0],"data_offsets":[4,4]},)"
      R"("__metadata__":null})",
      raw_bytes<float>({1, 2}));
  const SafeTensors st = parse_safetensors(hand, "empties.safetensors");
  std::vector<std::string> names;
  for (const auto& [n, t] : st.tensors) names.push_back(n);
  CHECK(names == std::vector<std::string>{"a", "e2", "e1", "b"});
  CHECK(st.metadata.empty());
}

TEST_CASE("safetensors skips unknown fields of an entry, however nested", "[io]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string hand = make_file(
      R"({"w":{"note":{"a":[1,{"b":null}],"a":2},"dtype":"I32","extra":)" + deep +
          R"(,"shape":[1],"more":"text","data_offsets":[0,4],"last":{}}})",
      raw_bytes<int32_t>({9}));
  const SafeTensors st = parse_safetensors(hand, "extra.safetensors");
  REQUIRE(st.tensors.size() == 1);
  CHECK(st.tensors[0].first == "w");
  CHECK(st.tensors[0].second.to_vector<int32_t>() == std::vector<int32_t>{9});
}

// ------------------------------------------------------------------ safetensors: malformed input

namespace {

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

// A JSON object from its members: {m1,m2,...}.
std::string object(std::initializer_list<std::string> members) {
  std::string s = "{";
  for (const std::string& m : members) s.append(s.size() > 1 ? "," : "").append(m);
  return s.append("}");
}

struct BadCase {
  const char* what;
  std::string bytes;
  const char* message;  // a fragment the error must contain
};

}  // namespace

TEST_CASE("safetensors rejects malformed files with a one-line error", "[io]") {
  const std::string f8 = raw_bytes<float>({1, 2});  // 8 bytes of data
  // A file holding one tensor 'w'.
  auto one = [&](const std::string& dtype, const std::string& shape, const std::string& offsets,
                 const std::string& data = "\x01\x02\x03\x04\x05\x06\x07\x08") {
    return make_file(object({entry("w", dtype, shape, offsets)}), data);
  };
  const std::string good = one("\"F32\"", "[2]", "[0,8]");
  REQUIRE_NOTHROW(parse_safetensors(good, "bad.safetensors"));

  const std::vector<BadCase> cases = {
      {"empty file", "", "file is 0 bytes, too short for the 8-byte header length"},
      {"five bytes", "abcde", "file is 5 bytes"},
      {"absurd header length", le64(9999999999) + "{}" + std::string(10, ' '),
       "header length 9999999999 exceeds file size 20"},
      {"header length past the end", le64(1ull << 63) + "{}", "exceeds file size 10"},
      {"truncated in the header", good.substr(0, 20), "exceeds file size 20"},
      {"truncated in the data", good.substr(0, good.size() - 3),
       "tensor 'w': data_offsets [0, 8] run past the end of the data section (5 bytes)"},
      {"zero header length", le64(0), "header is empty"},
      {"invalid JSON", make_file("{\"w\":"), "header is not valid JSON"},
      {"JSON with trailing junk", make_file("{} x"), "header is not valid JSON"},
      {"JSON array", make_file("[1, 2]"), "header does not start with '{'"},
      {"leading garbage", make_file("\x01{}"), "header does not start with '{'"},
      {"invalid UTF-8 in a name", make_file("{\"\xff\":1}"), "header is not valid JSON"},
      {"huge number", make_file("{\"w\":1e999}"), "header is not valid JSON"},
      {"entry not an object", make_file("{\"w\":5}"), "tensor 'w': entry is 5, expected an object"},
      {"entry an array", make_file("{\"w\":[]}"), "tensor 'w': entry is an array"},
      {"missing dtype", make_file("{\"w\":{\"shape\":[],\"data_offsets\":[0,4]}}", "abcd"),
       "tensor 'w': missing field 'dtype'"},
      {"missing shape", make_file("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "abcd"),
       "tensor 'w': missing field 'shape'"},
      {"missing data_offsets", make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[]}}", "abcd"),
       "tensor 'w': missing field 'data_offsets'"},
      {"dtype not a string", one("5", "[2]", "[0,8]"),
       "tensor 'w': dtype is 5, expected a string"},
      {"unsupported dtype", one("\"BF16\"", "[4]", "[0,8]"),
       "tensor 'w': dtype 'BF16' is not supported"},
      {"shape not an array", one("\"F32\"", "2", "[0,8]"),
       "tensor 'w': shape is 2, expected an array"},
      {"negative dimension", one("\"F32\"", "[-2]", "[0,8]"),
       "tensor 'w': shape dimension 0 is -2, expected an integer in [0, 2^63)"},
      {"fractional dimension", one("\"F32\"", "[1,2.5]", "[0,8]"),
       "tensor 'w': shape dimension 1 is the number 2.5"},
      {"string dimension", one("\"F32\"", "[\"2\"]", "[0,8]"),
       "tensor 'w': shape dimension 0 is the string '2'"},
      {"dimension above int64", one("\"F32\"", "[9223372036854775808]", "[0,8]"),
       "tensor 'w': shape dimension 0 is 9223372036854775808, expected an integer in [0, 2^63)"},
      {"too many dimensions",
       one("\"F32\"", "[1,1,1,1,1,1,1,1,2]", "[0,8]"),
       "tensor 'w': shape has more than 8 dimensions"},
      {"numel overflows", one("\"F32\"", "[4294967296,4294967296]", "[0,8]"),
       "tensor 'w': shape is too large"},
      {"empty shape whose strides overflow",
       one("\"F32\"", "[0,4611686018427387904,4611686018427387904]", "[0,0]", ""),
       "tensor 'w': shape is too large"},
      {"bytes overflow", one("\"F64\"", "[4611686018427387904]", "[0,8]"),
       "needs more than 2^64"},
      {"offsets not an array", one("\"F32\"", "[2]", "8"),
       "tensor 'w': data_offsets is 8, expected [begin, end]"},
      {"three offsets", one("\"F32\"", "[2]", "[0,8,8]"),
       "tensor 'w': data_offsets has more than 2 values, expected [begin, end]"},
      {"one offset", one("\"F32\"", "[2]", "[0]"),
       "tensor 'w': data_offsets has 1 value, expected [begin, end]"},
      {"offsets an object", one("\"F32\"", "[2]", "{}"),
       "tensor 'w': data_offsets is an object, expected [begin, end]"},
      {"shape an object", one("\"F32\"", "{\"0\":2}", "[0,8]"),
       "tensor 'w': shape is an object, expected an array"},
      {"nested dimension", one("\"F32\"", "[[2]]", "[0,8]"),
       "tensor 'w': shape dimension 0 is an array"},
      {"dtype null", one("null", "[2]", "[0,8]"), "tensor 'w': dtype is null, expected a string"},
      {"negative offset", one("\"F32\"", "[2]", "[-8,8]"),
       "tensor 'w': data_offsets begin is -8"},
      {"float offset", one("\"F32\"", "[2]", "[0,8.0]"),
       "tensor 'w': data_offsets end is the number 8.0"},
      {"end before begin", one("\"F32\"", "[0]", "[8,0]"),
       "tensor 'w': data_offsets [8, 0] end before they begin"},
      {"offsets out of range", one("\"F32\"", "[2]", "[0,18446744073709551615]"),
       "tensor 'w': data_offsets [0, 18446744073709551615] run past the end"},
      {"size mismatch", one("\"F32\"", "[3]", "[0,8]"),
       "tensor 'w': data_offsets [0, 8] hold 8 bytes, but shape [3] of F32 needs 12"},
      {"overlap",
       make_file(object({entry("a", "\"F32\"", "[2]", "[0,8]"),
                         entry("b", "\"F32\"", "[2]", "[4,12]")}),
                 f8 + "1234"),
       "tensor 'b' at bytes [4, 12) overlaps tensor 'a' at [0, 8)"},
      {"same range twice",
       make_file(object({entry("a", "\"F32\"", "[2]", "[0,8]"),
                         entry("b", "\"F32\"", "[2]", "[0,8]")}),
                 f8),
       "overlaps tensor"},
      {"gap",
       make_file(object({entry("a", "\"F32\"", "[1]", "[0,4]"),
                         entry("b", "\"F32\"", "[1]", "[8,12]")}),
                 f8 + "1234"),
       "gap of 4 bytes before tensor 'b'"},
      {"gap at the start", make_file(object({entry("a", "\"F32\"", "[1]", "[4,8]")}), f8),
       "gap of 4 bytes before tensor 'a'"},
      {"trailing bytes", one("\"F32\"", "[1]", "[0,4]"),
       "data section has 8 bytes, but the tensors cover only 4"},
      {"data without tensors", make_file("{}", f8), "data section has 8 bytes"},
      {"duplicate names",
       make_file(object({entry("w", "\"F32\"", "[1]", "[0,4]"),
                         entry("w", "\"F32\"", "[1]", "[4,8]")}),
                 f8),
       "tensor 'w' appears twice in the header"},
      {"duplicate field",
       make_file(R"({"w":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}})", f8),
       "tensor 'w': field 'dtype' appears twice"},
      {"duplicate metadata key", make_file("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}"),
       "__metadata__ has the key 'k' twice"},
      {"metadata not an object", make_file("{\"__metadata__\":[\"a\"]}"),
       "__metadata__ is an array, expected an object of strings"},
      {"metadata value not a string", make_file("{\"__metadata__\":{\"step\":12}}"),
       "__metadata__ value of 'step' is 12, expected a string"},
      {"metadata twice", make_file("{\"__metadata__\":{},\"__metadata__\":null}"),
       "__metadata__ appears twice in the header"},
      {"metadata value a boolean", make_file("{\"__metadata__\":{\"x\":true}}"),
       "__metadata__ value of 'x' is a boolean, expected a string"},
      {"metadata value an object", make_file("{\"__metadata__\":{\"x\":{}}}"),
       "__metadata__ value of 'x' is an object"},
      {"control characters in a name",
       make_file(object({entry("a\\nb", "\"F32\"", "[3]", "[0,8]")}), f8),
       "tensor 'a\\x0ab'"},
      {"deep nesting",
       make_file(object({"\"w\":" + std::string(100000, '[') + std::string(100000, ']')})),
       "tensor 'w': entry is an array"},
      {"unterminated deep nesting", make_file(std::string("{\"w\":{\"x\":").append(100000, '[')),
       "header is not valid JSON"},
  };
  for (const BadCase& c : cases) {
    INFO("case: " << c.what);
    REQUIRE_THROWS_AS(parse_safetensors(c.bytes, "bad.safetensors"), Error);
    REQUIRE_THROWS_WITH(parse_safetensors(c.bytes, "bad.safetensors"),
                        StartsWith("bad.safetensors: ") && Contains(c.message));
    try {
      parse_safetensors(c.bytes, "bad.safetensors");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find('\n') == std::string::npos);  // one line
    }
  }
}

TEST_CASE("safetensors rejects a header longer than 100 MB", "[io]") {
  const uint64_t n = 100'000'001;
  std::string bytes(8 + n, ' ');  // the length is checked before the header is read
  bytes.replace(0, 8, le64(n));
  REQUIRE_THROWS_WITH(parse_safetensors(bytes, "big.safetensors"),
                      Contains("big.safetensors: header length 100000001 exceeds the limit"));
}

TEST_CASE("save_safetensors rejects bad names and leaves no file", "[io]") {
  ScratchDir dir;
  const std::string path = dir.file("m.safetensors");
  const Tensor t = Tensor::zeros({2});
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"a", t}, {"a", t}}),
                      Contains(path + ": tensor 'a': the name is used twice"));
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"__metadata__", t}}),
                      Contains("the name is reserved for metadata"));
  REQUIRE_THROWS_WITH(save_safetensors(path, {{"u", Tensor()}}),
                      Contains("tensor 'u' is undefined"));
  REQUIRE_THROWS_WITH(serialize_safetensors({{"bad\xff", t}}),
                      Contains("tensor 'bad\xff': the name is not valid UTF-8"));
  REQUIRE_THROWS_WITH(save_safetensors(path, {}, {{"k", "\xfe"}}),
                      Contains(path + ": metadata value of 'k' is not valid UTF-8"));
  CHECK(dir.listing().empty());
}

TEST_CASE("load_safetensors names the path when the file is missing or a directory", "[io]") {
  ScratchDir dir;
  REQUIRE_THROWS_AS(load_safetensors(dir.file("none.safetensors")), Error);
  REQUIRE_THROWS_WITH(load_safetensors(dir.file("none.safetensors")),
                      Contains(dir.file("none.safetensors") + ": cannot open for reading") &&
                          Contains("No such file"));
  REQUIRE_THROWS_WITH(load_safetensors(dir.path.string()),
                      Contains(dir.path.string() + ": is a directory"));
  write_plain(dir.file("short.safetensors"), "abc");
  REQUIRE_THROWS_WITH(load_safetensors(dir.file("short.safetensors")),
                      Contains(dir.file("short.safetensors") + ": file is 3 bytes"));
}
