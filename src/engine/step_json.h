// StepPlan / StepResult <-> JSON: the plain data of a step written down, for logs, replays,
// the advisor's recordings and (later) other ranks. Every field round-trips exactly
// (from_json(to_json(x)) == x); reading rejects a malformed document with
// Error(kInvalidArgument) naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/step.h"

namespace rapide {

nlohmann::json step_plan_to_json(const StepPlan& plan);
StepPlan step_plan_from_json(const nlohmann::json& json);
nlohmann::json step_result_to_json(const StepResult& result);
StepResult step_result_from_json(const nlohmann::json& json);

}  // namespace rapide
