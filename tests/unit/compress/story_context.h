// The compression tests' workload, one definition for the unit and CLI tests: the shared
// story models and text (../shared, read in place) and a question whose answer passage is
// the third of stories-eval.txt's five (the "Ben" story), so it ranks that passage first.
#pragma once

namespace rapide::testing::story_context {

inline constexpr const char* kServed = "models/tinystories-656k/TinyStories-656K-F16.gguf";
inline constexpr const char* kSmall = "models/stories260K/stories260K.gguf";
inline constexpr const char* kText = "reference/text/stories-eval.txt";
inline constexpr const char* kQuestion = "Ben put the big blocks at the bottom, and Lily put the";

}  // namespace rapide::testing::story_context
