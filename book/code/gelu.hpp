// GPT-2's GELU (the tanh approximation) of one token vector, standard library only.
#pragma once

#include <cmath>
#include <vector>

// Each element stands alone: nothing is summed, so float is precise enough
// throughout, and std::tanh on a float is the float overload, as PyTorch computes it.
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
