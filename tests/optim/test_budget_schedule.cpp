// The budget schedule (optim/schedule.h): warm-up and decay to a floor at the end of a budget
// known in advance, and a budget re-estimated as a run goes (the rate stays continuous, reaches
// the floor at the new end, and a state restored from a checkpoint gives the same rates).
#include <cmath>

#include "rosetta/optim/schedule.h"
#include "support.h"

using namespace rosetta;
using namespace rosetta::optim;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using Kind = BudgetSchedule::Shape;
using State = BudgetSchedule::State;

TEST_CASE("a budget schedule known in advance warms up, then decays to its floor at the budget's end", "[optim]") {
  const BudgetSchedule lin(Kind::linear, 1e-3, 1e-4, State{10, 110, 0, 0.0});
  REQUIRE_THAT(lin.lr(5), WithinRel(0.5e-3, 1e-12));
  REQUIRE_THAT(lin.lr(10), WithinRel(1e-3, 1e-12));
  REQUIRE_THAT(lin.lr(60), WithinRel(1e-4 + 0.5 * 0.9e-3, 1e-12));
  REQUIRE_THAT(lin.lr(110), WithinRel(1e-4, 1e-12));
  REQUIRE_THAT(lin.lr(500), WithinRel(1e-4, 1e-12));
  for (int64_t s = 11; s <= 110; ++s) REQUIRE(lin.lr(s) < lin.lr(s - 1));
  // The cosine shape is CosineSchedule's.
  const BudgetSchedule cos(Kind::cosine, 1e-3, 1e-5, State{10, 110, 0, 0.0});
  const CosineSchedule reference(1e-3, 10, 110, 1e-5);
  for (int64_t s : {1, 7, 10, 11, 42, 60, 109, 110, 111, 400}) REQUIRE_THAT(cos.lr(s), WithinRel(reference.lr(s), 1e-12));
  // make_schedule's "linear" decays to 0.
  const auto by_name = make_schedule("linear", 2e-3, 4, 20, 16);
  REQUIRE_THAT(by_name->lr(4), WithinRel(2e-3, 1e-12));
  REQUIRE(by_name->lr(20) == 0.0);
  REQUIRE_THROWS_WITH(make_schedule("linear", 2e-3, 20, 20, 16), Catch::Contains("warmup (20)"));
  REQUIRE_THROWS_AS(BudgetSchedule(Kind::linear, 1e-3, 2e-3, State{}), Error);      // floor above the peak
  REQUIRE_THROWS_AS(BudgetSchedule(Kind::linear, 1e-3, 0, State{0, 10, 3, 1.5}), Error);  // progress > 1
  REQUIRE_THROWS_WITH(budget_shape(ScheduleKind::noam), Catch::Contains("linear, cosine"));
}

TEST_CASE("an unchanged budget leaves the rates of the plain formula bit for bit", "[optim]") {
  const BudgetSchedule plain(Kind::cosine, 3e-3, 0, State{7, 50, 0, 0.0});
  BudgetSchedule again(Kind::cosine, 3e-3, 0, State{7, 50, 0, 0.0});
  for (int64_t s = 1; s < 60; ++s) {
    again.rebudget(s, 50, 7);  // what a run with --max-steps sees at every re-estimate
    REQUIRE(again.lr(s + 1) == plain.lr(s + 1));
  }
}

TEST_CASE("a re-estimated budget keeps the rate continuous and ends at the new total", "[optim]") {
  for (const Kind shape : {Kind::linear, Kind::cosine}) {
    BudgetSchedule s(shape, 1e-3, 1e-5, State{10, 0, 0, 0.0});
    // The total unknown: warm-up, then the peak until the first estimate.
    REQUIRE_THAT(s.lr(10), WithinRel(1e-3, 1e-12));
    REQUIRE_THAT(s.lr(20), WithinRel(1e-3, 1e-12));
    s.rebudget(20, 220);  // the decay starts after update 20
    REQUIRE_THAT(s.lr(20), WithinRel(1e-3, 1e-12));
    REQUIRE(s.lr(21) < 1e-3);
    REQUIRE_THAT(s.lr(220), WithinRel(1e-5, 1e-12));
    // Slower than estimated: the end moves out; the rate at the re-estimate is unchanged, it
    // only falls more slowly, and reaches the floor at the new end.
    const double at_100 = s.lr(100), next_before = s.lr(101);
    s.rebudget(100, 300);
    REQUIRE(s.lr(100) == at_100);
    REQUIRE(s.lr(101) > next_before);
    REQUIRE(s.lr(101) < at_100);
    REQUIRE_THAT(s.lr(300), WithinRel(1e-5, 1e-12));
    REQUIRE(s.lr(299) > 1e-5);
    // Faster: the end moves in, and the rate never rises.
    const double at_200 = s.lr(200);
    s.rebudget(200, 240);
    REQUIRE(s.lr(200) == at_200);
    for (int64_t t = 201; t <= 240; ++t) REQUIRE(s.lr(t) < s.lr(t - 1));
    REQUIRE_THAT(s.lr(240), WithinRel(1e-5, 1e-12));
    // A budget already spent: the floor from the next update on.
    s.rebudget(230, 225);
    REQUIRE_THAT(s.lr(231), WithinRel(1e-5, 1e-12));
  }
}

TEST_CASE("a warm-up that is a share of an estimated budget", "[optim]") {
  BudgetSchedule s(Kind::linear, 2e-3, 0, State{-1, 0, 0, 0.0});
  REQUIRE(s.lr(1) == 0.0);  // before the first estimate, its length is unknown
  s.rebudget(1, 1001, 50);
  REQUIRE(s.state().warmup == 50);
  REQUIRE_THAT(s.lr(50), WithinRel(2e-3, 1e-12));
  REQUIRE_THAT(s.lr(2), WithinRel(2e-3 / 49, 1e-12));
  // A longer warm-up re-estimated midway: continuous, and the peak at its new end.
  const double at_20 = s.lr(20);
  s.rebudget(20, 2001, 100);
  REQUIRE(s.lr(20) == at_20);
  REQUIRE(s.lr(21) > at_20);
  REQUIRE_THAT(s.lr(100), WithinRel(2e-3, 1e-12));
  REQUIRE_THAT(s.lr(2001), WithinAbs(0, 1e-15));
  // A warm-up estimated at or below the update reached ends there.
  s.rebudget(60, 2001, 40);
  REQUIRE(s.state().warmup == 60);
  REQUIRE_THAT(s.lr(61), WithinRel(2e-3 * (1 - 1.0 / 1941), 1e-9));
  // Once the warm-up is over, a new share changes nothing of it.
  s.rebudget(70, 2001, 500);
  REQUIRE(s.state().warmup == 60);
}

TEST_CASE("a budget schedule's state restores the same rates", "[optim]") {
  BudgetSchedule s(Kind::cosine, 1e-3, 1e-4, State{-1, 0, 0, 0.0});
  s.rebudget(1, 400, 20);
  s.rebudget(8, 380, 19);
  s.rebudget(50, 433);
  s.rebudget(120, 401);
  BudgetSchedule restored(Kind::cosine, 1e-3, 1e-4, State{});
  restored.set_state(s.state());
  for (int64_t t = 121; t < 450; ++t) REQUIRE(restored.lr(t) == s.lr(t));
  REQUIRE_THAT(restored.lr(401), WithinRel(1e-4, 1e-12));
}
