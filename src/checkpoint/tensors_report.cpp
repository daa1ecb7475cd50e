// `tensors` report: per-component groups, JSON and the terminal table.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "checkpoint/tensors.h"
#include "util/names.h"
#include "util/util.h"

namespace flipscope {
namespace {

// Components in the order the table lists them.
constexpr const char* kComponents[] = {"token embedding", "attention", "MLP / experts", "norms",
                                       "output head",     "vision",    "MTP",           "other"};
constexpr size_t kListLimit = 20;  // rows per section of the text table (JSON has them all)

bool IsSame(TensorState s) { return s == TensorState::kIdentical || s == TensorState::kSameValues; }

void Count(TensorsReport::Group& g, const TensorDiff& d) {
  ++g.total;
  g.identical += IsSame(d.state);
  g.same_values += d.state == TensorState::kSameValues;
  g.different += d.state == TensorState::kDifferent || d.state == TensorState::kBytesDiffer;
  g.shape_mismatch += d.state == TensorState::kShapeMismatch;
  g.missing += d.state == TensorState::kMissing;
  g.extra += d.state == TensorState::kExtra;
  if (d.compared) {
    g.max_rel_l2 = std::max(g.max_rel_l2, d.rel_l2);
    g.min_cosine = std::min(g.min_cosine, d.cosine);
  }
}

// JSON has no infinity: a relative difference against an all-zero tensor becomes null.
nlohmann::json Num(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::string Shape(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::string TensorNames(const TensorDiff& d) {
  if (d.name_a.empty()) return d.name_b;
  if (d.name_b.empty() || d.name_b == d.name_a) return d.name_a;
  return d.name_a + " = " + d.name_b;
}

// One section of the text table: a title and up to kListLimit lines of the matching tensors.
void Section(std::string& s, const std::string& title, std::vector<const TensorDiff*> rows,
             const std::function<std::string(const TensorDiff&)>& line) {
  if (rows.empty()) return;
  s += fmt::format("\n{} ({}):\n", title, rows.size());
  for (size_t i = 0; i < rows.size() && i < kListLimit; ++i) {
    s += "  " + line(*rows[i]) + "\n";
    if (!rows[i]->note.empty()) s += "      " + rows[i]->note + "\n";
  }
  if (rows.size() > kListLimit)
    s += fmt::format("  ... {} more (--json lists every tensor)\n", rows.size() - kListLimit);
}

}  // namespace

// Tensor states as the tensors table and JSON spell them.
template <>
struct Names<TensorState> {
  static constexpr std::pair<TensorState, const char*> v[] = {{TensorState::kIdentical, "identical"},
                                                              {TensorState::kSameValues, "same values"},
                                                              {TensorState::kDifferent, "different"},
                                                              {TensorState::kBytesDiffer, "bytes differ"},
                                                              {TensorState::kShapeMismatch, "shape mismatch"},
                                                              {TensorState::kMissing, "missing"},
                                                              {TensorState::kExtra, "extra"}};
};

const char* TensorStateName(TensorState s) { return NameOf(s).data(); }

std::vector<TensorsReport::Group> TensorsReport::Groups() const {
  std::vector<Group> out;
  Group all;
  all.component = "overall";
  for (const char* c : kComponents) {
    Group g;
    g.component = c;
    for (const auto& d : tensors)
      if (d.component == c) Count(g, d), Count(all, d);
    if (g.total > 0) out.push_back(g);
  }
  out.push_back(all);
  return out;
}

bool TensorsReport::Same() const {
  return std::all_of(tensors.begin(), tensors.end(), [](const TensorDiff& d) { return IsSame(d.state); });
}

const TensorDiff* TensorsReport::Find(const std::string& name) const {
  for (const auto& d : tensors)
    if (d.name_a == name || d.name_b == name) return &d;
  return nullptr;
}

nlohmann::json TensorsReport::ToJson() const {
  const std::string fa(NameOf(format_a)), fb(NameOf(format_b));
  nlohmann::json j = {{"a", {{"path", path_a}, {"format", fa}, {"tensors", n_tensors_a}, {"bytes", bytes_a}}},
                      {"b", {{"path", path_b}, {"format", fb}, {"tensors", n_tensors_b}, {"bytes", bytes_b}}},
                      {"same", Same()},
                      {"seconds", seconds}};
  for (const auto& g : Groups())
    j["groups"].push_back({{"component", g.component},
                           {"total", g.total},
                           {"identical", g.identical},
                           {"same_values", g.same_values},
                           {"different", g.different},
                           {"shape_mismatch", g.shape_mismatch},
                           {"missing", g.missing},
                           {"extra", g.extra},
                           {"max_rel_l2", Num(g.max_rel_l2)},
                           {"min_cosine", Num(g.min_cosine)}});
  for (const auto& d : tensors) {
    nlohmann::json t = {
        {"name_a", d.name_a},   {"name_b", d.name_b},   {"component", d.component}, {"state", TensorStateName(d.state)},
        {"dtype_a", d.dtype_a}, {"dtype_b", d.dtype_b}, {"shape_a", d.shape_a},     {"shape_b", d.shape_b}};
    if (d.hash_a || d.hash_b)
      t["xxh3_a"] = fmt::format("{:016x}", d.hash_a), t["xxh3_b"] = fmt::format("{:016x}", d.hash_b);
    if (d.compared) {
      t["rel_l2"] = Num(d.rel_l2), t["max_abs"] = Num(d.max_abs), t["cosine"] = Num(d.cosine);
      t["n_differ"] = d.n_differ, t["nonfinite_mismatch"] = d.nonfinite_mismatch;
    }
    if (d.qk_unpermuted) t["qk_unpermuted"] = true, t["rel_l2_as_stored"] = Num(d.rel_l2_raw);
    if (!d.note.empty()) t["note"] = d.note;
    j["tensors"].push_back(std::move(t));
  }
  return j;
}

std::string TensorsReport::ToText() const {
  std::string s;
  s += fmt::format("A  {}  ({}, {} tensors, {})\n", path_a, NameOf(format_a), n_tensors_a, HumanBytes(double(bytes_a)));
  s += fmt::format("B  {}  ({}, {} tensors, {})\n\n", path_b, NameOf(format_b), n_tensors_b,
                   HumanBytes(double(bytes_b)));
  s += fmt::format("{:<17}{:>13}{:>11}{:>7}{:>9}{:>7}{:>13}{:>14}\n", "component", "identical", "different", "shape",
                   "missing", "extra", "max rel L2", "min cosine");
  auto groups = Groups();
  for (const auto& g : groups) {
    if (g.component == "overall") s += std::string(91, '-') + "\n";
    bool metrics = g.different > 0;
    s += fmt::format("{:<17}{:>13}{:>11}{:>7}{:>9}{:>7}{:>13}{:>14}\n", g.component,
                     fmt::format("{} of {}", g.identical, g.total), g.different, g.shape_mismatch, g.missing, g.extra,
                     metrics ? fmt::format("{:.3e}", g.max_rel_l2) : "-",
                     metrics ? fmt::format("{:.10f}", g.min_cosine) : "-");
  }
  const auto& all = groups.back();
  int bytewise = all.identical - all.same_values;
  s += Same()
           ? fmt::format("\nthe same weights: {} of {} tensors identical ({} byte for byte, {} equal after decoding)\n",
                         all.identical, all.total, bytewise, all.same_values)
           : fmt::format("\nnot the same weights: {} of {} tensors identical ({} byte for byte)\n", all.identical,
                         all.total, bytewise);
  auto pick = [&](auto pred) {
    std::vector<const TensorDiff*> v;
    for (const auto& d : tensors)
      if (pred(d)) v.push_back(&d);
    return v;
  };
  auto different = pick(
      [](const TensorDiff& d) { return d.state == TensorState::kDifferent || d.state == TensorState::kBytesDiffer; });
  std::stable_sort(different.begin(), different.end(), [](auto* x, auto* y) { return x->rel_l2 > y->rel_l2; });
  Section(s, "different, largest relative L2 first", different, [](const TensorDiff& d) {
    if (!d.compared) return fmt::format("{}  {} vs {}  bytes differ", TensorNames(d), d.dtype_a, d.dtype_b);
    return fmt::format("{}  {} vs {} {}  rel L2 {:.3e}  max |a-b| {:.3e}  cosine {:.10f}  {} elements differ",
                       TensorNames(d), d.dtype_a, d.dtype_b, Shape(d.shape_a), d.rel_l2, d.max_abs, d.cosine,
                       d.n_differ);
  });
  Section(s, "equal after decoding, stored differently",
          pick([](const TensorDiff& d) { return d.state == TensorState::kSameValues; }),
          [](const TensorDiff& d) { return fmt::format("{}  {} vs {}", TensorNames(d), d.dtype_a, d.dtype_b); });
  Section(s, "shape mismatch (not compared)",
          pick([](const TensorDiff& d) { return d.state == TensorState::kShapeMismatch; }), [](const TensorDiff& d) {
            return fmt::format("{}  {} vs {}", TensorNames(d), Shape(d.shape_a), Shape(d.shape_b));
          });
  Section(s, "missing in B", pick([](const TensorDiff& d) { return d.state == TensorState::kMissing; }),
          [](const TensorDiff& d) { return fmt::format("{}  {} {}", d.name_a, d.dtype_a, Shape(d.shape_a)); });
  Section(s, "extra in B", pick([](const TensorDiff& d) { return d.state == TensorState::kExtra; }),
          [](const TensorDiff& d) { return fmt::format("{}  {} {}", d.name_b, d.dtype_b, Shape(d.shape_b)); });
  return s;
}

}  // namespace flipscope
