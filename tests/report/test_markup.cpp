// The report layer's documents as text: the one escaper (escape_markup) and the SVG charts that
// use it (line_chart_svg, heatmap_svg). The page itself, drawn from run directories, is tested
// through the CLI (tests/apps/test_report.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "rosetta/core/tensor.h"
#include "rosetta/report/escape.h"
#include "rosetta/report/svg.h"

using rosetta::report::escape_markup;

namespace {

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("escape_markup escapes markup and quotes, and drops what XML forbids", "[report]") {
  REQUIRE(escape_markup("<a href=\"x\">&'</a>") == "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
  REQUIRE(escape_markup("ä ∑ plain") == "ä ∑ plain");
  // Tab, newline and carriage return stay; other control characters, NUL included, are dropped.
  REQUIRE(escape_markup(std::string("a\x01" "b\tc\nd\re\0f", 11)) == "ab\tc\nd\ref");
  REQUIRE(escape_markup("") == "");
}

TEST_CASE("line_chart_svg escapes its text and skips NaN points", "[report]") {
  using rosetta::report::Series;
  const Series loss{"train <loss>", "#1f77b4", {{0, 3.0}, {1, NAN}, {2, 2.0}}};
  const Series bleu{"BLEU & chrF", "#d62728", {{0, 1.0}, {2, 4.0}}};
  const std::string svg =
      rosetta::report::line_chart_svg("run 'a' <b>", "step", "loss", {loss}, "score", {bleu});
  REQUIRE(svg.rfind("<?xml", 0) == 0);
  REQUIRE(svg.find("</svg>") != std::string::npos);
  REQUIRE(svg.find("run &#39;a&#39; &lt;b&gt;") != std::string::npos);
  REQUIRE(svg.find("train &lt;loss&gt;") != std::string::npos);
  REQUIRE(svg.find("BLEU &amp; chrF") != std::string::npos);
  REQUIRE(svg.find("<b>") == std::string::npos);
  REQUIRE(svg.find("nan") == std::string::npos);
}

TEST_CASE("heatmap_svg draws a cell per weight, its labels escaped", "[report]") {
  const rosetta::Tensor w = rosetta::Tensor::from_vector(std::vector<float>{0.1f, 0.9f, 0.5f, 0.5f, 1.0f, 0.0f}, {3, 2});
  const std::string svg = rosetta::report::heatmap_svg("attention", w, {"<s>", "a&b", "</s>"}, {"x", "\"y\""});
  REQUIRE(svg.find("&lt;s&gt;") != std::string::npos);
  REQUIRE(svg.find("a&amp;b") != std::string::npos);
  REQUIRE(svg.find("&quot;y&quot;") != std::string::npos);
  REQUIRE(svg.find("<s>") == std::string::npos);
  REQUIRE(count(svg, "<title>") >= 6);  // every cell says its value on hover
}
