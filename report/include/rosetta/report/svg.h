// SVG documents a person can open in a browser: loss curves and attention heatmaps.
#pragma once

#include <string>
#include <vector>

#include "rosetta/core/tensor.h"

namespace rosetta::report {

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (x, y); NaN y values are skipped
};

// A line chart with axes, ticks, a legend and a title. Series on the right axis get their own
// scale (e.g. BLEU next to losses).
std::string line_chart_svg(const std::string& title, const std::string& x_label,
                           const std::string& left_label, const std::vector<Series>& left,
                           const std::string& right_label, const std::vector<Series>& right);

// A heatmap of `weights` [rows, cols] with row and column labels (e.g. target x source tokens).
std::string heatmap_svg(const std::string& title, const Tensor& weights,
                        const std::vector<std::string>& row_labels,
                        const std::vector<std::string>& col_labels);

}  // namespace rosetta::report
