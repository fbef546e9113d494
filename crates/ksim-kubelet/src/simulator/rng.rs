//! [`ClockRng`]: the cluster clock's seeded random source as a `rand` generator,
//! so stage choice, delay jitter and lease jitter draw from the one sequence a
//! seeded cluster repeats.

use ksim_runtime::clock::Random;
use rand::RngCore;

/// A `rand` generator drawing from the cluster's [`Random`].
#[derive(Debug, Clone, Copy)]
pub struct ClockRng<'a>(pub &'a Random);

impl RngCore for ClockRng<'_> {
    fn next_u32(&mut self) -> u32 {
        (self.0.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.0.fill(dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn a_seeded_source_gives_the_same_draws() {
        let (a, b) = (Random::seeded(3), Random::seeded(3));
        let draw = |r: &Random| -> Vec<u64> {
            (0..8)
                .map(|_| ClockRng(r).random_range(0..1_000_000))
                .collect()
        };
        assert_eq!(draw(&a), draw(&b));
        assert_ne!(draw(&a), draw(&Random::seeded(4)));
    }
}
