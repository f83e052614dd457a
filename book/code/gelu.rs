// GPT-2's GELU (the tanh approximation) of one token vector, standard library only.

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for each element of `x`.
/// Each element stands alone, with no long sum, so f32 is used throughout, as in PyTorch;
/// 1 + tanh(inner) loses relative accuracy for x below about -3, but stays within about
/// 1e-7 absolutely.
fn gelu_tanh(x: &[f32]) -> Vec<f32> {
    // Rounded to f32 once, from f64, like the C++ and PyTorch's constant.
    let sqrt_2_over_pi = (2.0_f64 / std::f64::consts::PI).sqrt() as f32;
    x.iter()
        .map(|&xi| {
            let inner = sqrt_2_over_pi * (xi + 0.044715 * xi.powi(3));
            0.5 * xi * (1.0 + inner.tanh())
        })
        .collect()
}
