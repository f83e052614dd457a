// GPT-2's GELU (the tanh approximation) of one token vector, standard library only.
#pragma once

#include <cmath>
#include <vector>

// Each element stands alone, with no long sum, so float is used throughout, as PyTorch
// computes it (std::tanh on a float is the float overload). 1 + tanh(inner) loses
// relative accuracy for x below about -3, but stays within about 1e-7 absolutely.
inline std::vector<float> gelu_tanh(const std::vector<float>& x) {
    const float sqrt_2_over_pi = static_cast<float>(std::sqrt(2.0 / 3.141592653589793));
    std::vector<float> out;
    out.reserve(x.size());
    for (float xi : x) {
        const float inner = sqrt_2_over_pi * (xi + 0.044715f * xi * xi * xi);
        out.push_back(0.5f * xi * (1.0f + std::tanh(inner)));
    }
    return out;
}
