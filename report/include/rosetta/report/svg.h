// SVG documents a person can open in a browser: loss curves and attention heatmaps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rosetta/core/tensor.h"

namespace rosetta::translator {
struct Translator;
}

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

// heatmap_svg of the cross-attention of `t`'s last decoder layer (mean over heads) while it
// translates `source` into `best` (target ids, without bos and eos): the target pieces and </s>
// by the source pieces, the source cut to the model's maximum length (`translate --attention`).
std::string attention_heatmap_svg(const translator::Translator& t, const std::string& source,
                                  const std::vector<int32_t>& best);

}  // namespace rosetta::report
