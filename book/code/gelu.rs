// GPT-2's GELU (the tanh approximation) of one token vector, standard library only.

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for each element of `x`.
/// Nothing is summed, so f32 is precise enough throughout, as in PyTorch.
fn gelu_tanh(x: &[f32]) -> Vec<f32> {
    let sqrt_2_over_pi = (2.0 / std::f32::consts::PI).sqrt();
    x.iter()
        .map(|&xi| {
            let inner = sqrt_2_over_pi * (xi + 0.044715 * xi.powi(3));
            0.5 * xi * (1.0 + inner.tanh())
        })
        .collect()
}
