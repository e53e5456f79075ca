// Numbers as the report prints them. Each kind of figure has its own rule for what is too
// small to mean anything, so that rounding noise (a difference of two sums that should be
// equal: 3.35e-13 s) prints as 0 while genuinely small figures keep their digits (a 1e-5
// learning rate, a 40 µs part of a step):
//   - plain numbers (losses, learning rates, gradient norms, energies) keep `digits`
//     significant digits at any magnitude: format_number(v, digits);
//   - a number shown beside others in one column or legend, whose precision is set by the
//     largest of them: format_number(v, digits, resolution) prints 0 below resolution / 2;
//   - durations: format_seconds(s, resolution), 0 below resolution / 2 (by default 1 µs:
//     no timer of a step resolves less), and otherwise in h, min, s, ms or µs;
//   - shares of a whole: format_share, to 0.01 %.
#pragma once
#include <string>

namespace nl {

// A number with about `digits` significant digits, without trailing zeros: 0.125, 1.5e+06,
// 1e-05. With `resolution` > 0, a value whose magnitude is below resolution / 2 is "0".
std::string format_number(double v, int digits = 4, double resolution = 0);

// Seconds as "42 s", "12.5 min", "3.2 h", "250 ms", "40 µs"; "0 s" below resolution / 2.
std::string format_seconds(double s, double resolution = 1e-6);

// part / whole as a percentage to at most 3 significant digits and no finer than 0.01 %:
// "75%", "33.3%", "0.04%", "0%".
std::string format_share(double part, double whole);

}  // namespace nl
