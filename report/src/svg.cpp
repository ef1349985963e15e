#include "rosetta/report/svg.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "rosetta/core/check.h"
#include "rosetta/report/escape.h"
#include "rosetta/translator/translator.h"

namespace rosetta::report {

namespace {

// "Nice" tick values covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int target = 6) {
  const double span = hi - lo;
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) t.push_back(v);
  return t;
}

std::string fmt_num(double v) {
  std::ostringstream os;
  if (std::abs(v) >= 1000 || v == std::floor(v)) os << std::fixed << std::setprecision(0) << v;
  else os << std::setprecision(3) << v;
  return os.str();
}

// The start of an SVG document of W x H on a white background, with one-decimal numbers.
void svg_open(std::ostringstream& o, double W, double H) {
  o << std::fixed << std::setprecision(1);
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  void finish() {
    if (!std::isfinite(lo)) lo = 0, hi = 1;
    if (hi - lo < 1e-12) lo -= 0.5, hi += 0.5;
  }
};

}  // namespace

std::string line_chart_svg(const std::string& title, const std::string& x_label,
                           const std::string& left_label, const std::vector<Series>& left,
                           const std::string& right_label, const std::vector<Series>& right) {
  const double W = 900, H = 520, ml = 80, mr = right.empty() ? 30 : 80, mt = 50, mb = 60;
  const double pw = W - ml - mr, ph = H - mt - mb;
  Range xr, yl, yr;
  for (const auto& s : left)
    for (auto [x, y] : s.points) xr.add(x), yl.add(y);
  for (const auto& s : right)
    for (auto [x, y] : s.points) xr.add(x), yr.add(y);
  xr.finish();
  yl.finish();
  yr.finish();
  auto X = [&](double x) { return ml + (x - xr.lo) / (xr.hi - xr.lo) * pw; };
  auto YL = [&](double y) { return mt + ph - (y - yl.lo) / (yl.hi - yl.lo) * ph; };
  auto YR = [&](double y) { return mt + ph - (y - yr.lo) / (yr.hi - yr.lo) * ph; };

  std::ostringstream o;
  svg_open(o, W, H);
  o << "<text x=\"" << W / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" << escape_markup(title)
    << "</text>\n";
  // Grid and ticks.
  for (double t : ticks(xr.lo, xr.hi))
    o << "<line x1=\"" << X(t) << "\" y1=\"" << mt << "\" x2=\"" << X(t) << "\" y2=\"" << mt + ph
      << "\" stroke=\"#eee\"/><text x=\"" << X(t) << "\" y=\"" << mt + ph + 18
      << "\" text-anchor=\"middle\">" << fmt_num(t) << "</text>\n";
  for (double t : ticks(yl.lo, yl.hi))
    o << "<line x1=\"" << ml << "\" y1=\"" << YL(t) << "\" x2=\"" << ml + pw << "\" y2=\"" << YL(t)
      << "\" stroke=\"#eee\"/><text x=\"" << ml - 8 << "\" y=\"" << YL(t) + 4
      << "\" text-anchor=\"end\">" << fmt_num(t) << "</text>\n";
  if (!right.empty())
    for (double t : ticks(yr.lo, yr.hi))
      o << "<text x=\"" << ml + pw + 8 << "\" y=\"" << YR(t) + 4 << "\">" << fmt_num(t) << "</text>\n";
  o << "<rect x=\"" << ml << "\" y=\"" << mt << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << ml + pw / 2 << "\" y=\"" << H - 15 << "\" text-anchor=\"middle\">" << escape_markup(x_label)
    << "</text>\n";
  o << "<text transform=\"translate(20," << mt + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << escape_markup(left_label) << "</text>\n";
  if (!right.empty())
    o << "<text transform=\"translate(" << W - 15 << "," << mt + ph / 2
      << ") rotate(90)\" text-anchor=\"middle\">" << escape_markup(right_label) << "</text>\n";
  // Series.
  int legend = 0;
  auto draw = [&](const Series& s, auto&& Y) {
    std::ostringstream path;
    path << std::fixed << std::setprecision(1);
    bool pen = false;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) {
        pen = false;
        continue;
      }
      path << (pen ? " L" : " M") << X(x) << "," << Y(y);
      pen = true;
    }
    o << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\"/>\n";
    if (s.points.size() <= 60)
      for (auto [x, y] : s.points)
        if (std::isfinite(y))
          o << "<circle cx=\"" << X(x) << "\" cy=\"" << Y(y) << "\" r=\"3\" fill=\"" << s.color << "\"/>\n";
    const double ly = mt + 16 + 18 * legend++;
    o << "<line x1=\"" << ml + pw - 150 << "\" y1=\"" << ly - 4 << "\" x2=\"" << ml + pw - 130 << "\" y2=\""
      << ly - 4 << "\" stroke=\"" << s.color << "\" stroke-width=\"2\"/><text x=\"" << ml + pw - 124
      << "\" y=\"" << ly << "\">" << escape_markup(s.name) << "</text>\n";
  };
  for (const auto& s : left) draw(s, YL);
  for (const auto& s : right) draw(s, YR);
  o << "</svg>\n";
  return o.str();
}

std::string heatmap_svg(const std::string& title, const Tensor& weights_in,
                        const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
  ROSETTA_CHECK(weights_in.dim() == 2, "heatmap: weights must be 2-D, got ", weights_in.shape());
  const Tensor w = weights_in.to(DType::f64).contiguous();
  const int64_t R = w.shape()[0], C = w.shape()[1];
  ROSETTA_CHECK(int64_t(rows.size()) == R && int64_t(cols.size()) == C, "heatmap: ", rows.size(), " x ",
                cols.size(), " labels for a ", w.shape(), " matrix");
  const double cell = 28, ml = 140, mt = 130;
  const double W = ml + C * cell + 40, H = mt + R * cell + 40;
  const double* p = w.data<double>();
  double hi = 0;
  for (int64_t i = 0; i < R * C; ++i) hi = std::max(hi, p[i]);
  if (hi <= 0) hi = 1;
  std::ostringstream o;
  svg_open(o, W, H);
  o << "<text x=\"10\" y=\"22\" font-size=\"15\">" << escape_markup(title) << "</text>\n";
  for (int64_t c = 0; c < C; ++c)
    o << "<text transform=\"translate(" << ml + c * cell + cell / 2 + 4 << "," << mt - 6
      << ") rotate(-60)\">" << escape_markup(cols[c]) << "</text>\n";
  for (int64_t r = 0; r < R; ++r) {
    o << "<text x=\"" << ml - 6 << "\" y=\"" << mt + r * cell + cell / 2 + 4 << "\" text-anchor=\"end\">"
      << escape_markup(rows[r]) << "</text>\n";
    for (int64_t c = 0; c < C; ++c) {
      const double v = std::clamp(p[r * C + c] / hi, 0.0, 1.0);
      const int shade = int(255 - 225 * v);
      o << "<rect x=\"" << ml + c * cell << "\" y=\"" << mt + r * cell << "\" width=\"" << cell
        << "\" height=\"" << cell << "\" fill=\"rgb(" << shade << "," << shade << ",255)\"><title>"
        << escape_markup(rows[r]) << " / " << escape_markup(cols[c]) << ": " << std::setprecision(3)
        << p[r * C + c] << std::setprecision(1) << "</title></rect>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

std::string attention_heatmap_svg(const translator::Translator& t, const std::string& source,
                                  const std::vector<int32_t>& best) {
  std::vector<int32_t> src = t.codec.encode_source(source);
  if (int64_t(src.size()) > t.model->options().max_len()) src.resize(size_t(t.model->options().max_len()));
  if (src.empty()) src.push_back(data::kEosId);
  const Tensor w = translator::attention_map(*t.model, src, best, data::kBosId);
  std::vector<std::string> rows = t.codec.target_pieces(best), cols = t.codec.source_pieces(source);
  rows.push_back("</s>");
  cols.resize(src.size(), "</s>");
  return heatmap_svg("cross-attention, last decoder layer (mean over heads): " + source, w, rows, cols);
}

}  // namespace rosetta::report
