// LayerNorm and RMSNorm of one token vector, standard library only.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

// Sums are accumulated in double: the rounding error of a sum grows with its number of
// terms, and in double each step's error is 2^29 times smaller than in float, at no real
// cost here. The variance is a second pass around the mean, never the one-pass
// mean(x^2) - mean^2, which cancels badly in float when the spread is small next to the
// mean (Welford's method is the stable way to do it in one pass).
// Each output is rounded to float once, at the end.

inline std::vector<float> layer_norm(const std::vector<float>& x,
                                     const std::vector<float>& gamma,
                                     const std::vector<float>& beta, float eps = 1e-5f) {
    const std::size_t width = x.size();
    if (width == 0 || gamma.size() != width || beta.size() != width)
        throw std::invalid_argument("layer_norm: x, gamma, beta need one length > 0");
    double sum = 0.0;
    for (float xi : x) sum += xi;
    const double mean = sum / width;
    double squares = 0.0;
    for (float xi : x) squares += (xi - mean) * (xi - mean);
    const double var = squares / width;                  // divide by D, not D - 1
    const double inv_std = 1.0 / std::sqrt(var + eps);   // eps inside the square root
    std::vector<float> out(width);
    for (std::size_t i = 0; i < width; ++i)
        out[i] = static_cast<float>(gamma[i] * (x[i] - mean) * inv_std + beta[i]);
    return out;
}

// RMSNorm: no mean subtracted and no beta; divide by the root mean square, then scale.
inline std::vector<float> rms_norm(const std::vector<float>& x,
                                   const std::vector<float>& gamma, float eps = 1e-5f) {
    const std::size_t width = x.size();
    if (width == 0 || gamma.size() != width)
        throw std::invalid_argument("rms_norm: x and gamma need one length > 0");
    double squares = 0.0;
    for (float xi : x) squares += static_cast<double>(xi) * xi;
    const double mean_square = squares / width;
    const double inv_rms = 1.0 / std::sqrt(mean_square + eps);   // eps inside the root
    std::vector<float> out(width);
    for (std::size_t i = 0; i < width; ++i)
        out[i] = static_cast<float>(gamma[i] * (x[i] * inv_rms));
    return out;
}
