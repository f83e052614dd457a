// LayerNorm and RMSNorm of one token vector, standard library only.
//
// Sums are accumulated in f64, as in the C++: adding 768 f32s one at a time in f32
// rounds at every step. The variance is a second pass around the mean, never the
// one-pass mean(x^2) - mean^2, which cancels badly when the spread is small next to
// the mean. Each output is rounded to f32 once, at the end.

/// The LayerNorm of one token vector `x`, with learned scale `gamma` and shift `beta`.
fn layer_norm(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32) -> Vec<f32> {
    assert!(!x.is_empty() && gamma.len() == x.len() && beta.len() == x.len());
    let width = x.len() as f64;
    let mean = x.iter().map(|&xi| f64::from(xi)).sum::<f64>() / width;
    let var = x
        .iter()
        .map(|&xi| (f64::from(xi) - mean).powi(2))
        .sum::<f64>()
        / width; // divide by D, not D - 1
    let inv_std = 1.0 / (var + f64::from(eps)).sqrt(); // eps inside the square root
    x.iter()
        .zip(gamma)
        .zip(beta)
        .map(|((&xi, &g), &b)| {
            (f64::from(g) * (f64::from(xi) - mean) * inv_std + f64::from(b)) as f32
        })
        .collect()
}

/// The RMSNorm of `x`: no mean subtracted and no beta; divide by the root mean square,
/// then scale by `gamma`.
fn rms_norm(x: &[f32], gamma: &[f32], eps: f32) -> Vec<f32> {
    assert!(!x.is_empty() && gamma.len() == x.len());
    let width = x.len() as f64;
    let mean_square = x.iter().map(|&xi| f64::from(xi).powi(2)).sum::<f64>() / width;
    let inv_rms = 1.0 / (mean_square + f64::from(eps)).sqrt(); // eps inside the root
    x.iter()
        .zip(gamma)
        .map(|(&xi, &g)| (f64::from(g) * (f64::from(xi) * inv_rms)) as f32)
        .collect()
}
