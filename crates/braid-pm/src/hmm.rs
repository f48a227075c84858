//! Link-state prediction with a hidden Markov model (seed 004 §III.C, Appendix A): hidden
//! states {connect, disconnect}, observations {good, moderate, bad}; the Viterbi algorithm finds
//! the most likely hidden state sequence of a window of observations, and its last state is the
//! prediction.

use braid_core::scheduler::qoe::Band;

/// Hidden state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Connect = 0,
    Disconnect = 1,
}

/// Observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obs {
    Good = 0,
    Moderate = 1,
    Bad = 2,
}

/// The model λ = (π, A, B).
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Start probabilities π, indexed by [`State`].
    pub start: [f64; 2],
    /// Transition matrix A: `trans[from][to]`.
    pub trans: [[f64; 2]; 2],
    /// Emission matrix B: `emit[state][obs]`.
    pub emit: [[f64; 3]; 2],
}

impl Default for Model {
    /// The parameters of seed 004 Appendix A (SPEC M4).
    fn default() -> Self {
        Model {
            start: [0.65, 0.35],
            trans: [[0.7, 0.3], [0.4, 0.6]],
            emit: [[0.55, 0.35, 0.1], [0.1, 0.3, 0.6]],
        }
    }
}

impl Model {
    /// The most likely hidden state sequence for `obs` (Viterbi), computed in log space.
    /// Ties go to `Connect`. Empty input gives an empty sequence.
    pub fn viterbi(&self, obs: &[Obs]) -> Vec<State> {
        let Some(&first) = obs.first() else {
            return Vec::new();
        };
        let ln = |p: f64| if p > 0.0 { p.ln() } else { f64::NEG_INFINITY };
        let mut delta = [
            ln(self.start[0]) + ln(self.emit[0][first as usize]),
            ln(self.start[1]) + ln(self.emit[1][first as usize]),
        ];
        let mut psi: Vec<[usize; 2]> = Vec::with_capacity(obs.len());
        psi.push([0, 0]);
        for &o in &obs[1..] {
            let mut next = [0.0; 2];
            let mut back = [0usize; 2];
            for to in 0..2 {
                // seed 004 App. A, find_max_value_index: max over the previous states.
                let via0 = delta[0] + ln(self.trans[0][to]);
                let via1 = delta[1] + ln(self.trans[1][to]);
                let (best, arg) = if via0 >= via1 { (via0, 0) } else { (via1, 1) };
                next[to] = best + ln(self.emit[to][o as usize]);
                back[to] = arg;
            }
            delta = next;
            psi.push(back);
        }
        let mut last = if delta[0] >= delta[1] { 0 } else { 1 };
        let mut path = vec![State::Connect; obs.len()];
        for t in (0..obs.len()).rev() {
            path[t] = if last == 0 {
                State::Connect
            } else {
                State::Disconnect
            };
            last = psi[t][last];
        }
        path
    }

    /// The state the link is predicted to be in: the last state of the Viterbi path.
    pub fn predict(&self, obs: &[Obs]) -> Option<State> {
        self.viterbi(obs).last().copied()
    }
}

/// Observation from a smoothed signal strength: bad at most `bad_margin` dB above the
/// threshold, good at least `good_margin` dB above it, moderate between.
pub fn observe_rss(
    rss_dbm: f64,
    threshold_dbm: f64,
    good_margin_db: f64,
    bad_margin_db: f64,
) -> Obs {
    if rss_dbm <= threshold_dbm + bad_margin_db {
        Obs::Bad
    } else if rss_dbm >= threshold_dbm + good_margin_db {
        Obs::Good
    } else {
        Obs::Moderate
    }
}

/// Observation from seed 004's `if_quality` (0..=10000): good 8001–10000, moderate 5001–8000,
/// bad 0–5000 (Table 2, the QoE scheduler's bands).
pub fn observe_quality(if_quality: u32) -> Obs {
    match Band::of(if_quality) {
        Band::Good => Obs::Good,
        Band::Moderate => Obs::Moderate,
        Band::Bad => Obs::Bad,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Obs::*;
    use State::*;

    /// Brute force over every state sequence: the reference for Viterbi.
    fn brute(m: &Model, obs: &[Obs]) -> Vec<State> {
        let n = obs.len();
        let mut best = (f64::MIN, Vec::new());
        for mask in 0..(1u32 << n) {
            let seq: Vec<usize> = (0..n)
                .map(|t| ((mask >> (n - 1 - t)) & 1) as usize)
                .collect();
            let mut p = m.start[seq[0]] * m.emit[seq[0]][obs[0] as usize];
            for t in 1..n {
                p *= m.trans[seq[t - 1]][seq[t]] * m.emit[seq[t]][obs[t] as usize];
            }
            if p > best.0 {
                best = (p, seq);
            }
        }
        best.1
            .into_iter()
            .map(|s| if s == 0 { Connect } else { Disconnect })
            .collect()
    }

    #[test]
    fn single_observations_by_hand() {
        let m = Model::default();
        // good: connect 0.65·0.55 = 0.3575 > disconnect 0.35·0.1 = 0.035
        assert_eq!(m.viterbi(&[Good]), vec![Connect]);
        // bad: connect 0.65·0.1 = 0.065 < disconnect 0.35·0.6 = 0.21
        assert_eq!(m.viterbi(&[Bad]), vec![Disconnect]);
        // moderate: connect 0.65·0.35 = 0.2275 > disconnect 0.35·0.3 = 0.105
        assert_eq!(m.viterbi(&[Moderate]), vec![Connect]);
    }

    #[test]
    fn seed_004_example_sequence_by_hand() {
        // "time.viterbi_algorithm 2 1 0" in seed 004: observations bad, moderate, good.
        // t0: C = 0.65·0.1 = 0.065, D = 0.35·0.6 = 0.21
        // t1 (moderate): C = max(0.065·0.7, 0.21·0.4)·0.35 = 0.084·0.35 = 0.0294 (from D)
        //                D = max(0.065·0.3, 0.21·0.6)·0.3  = 0.126·0.3  = 0.0378 (from D)
        // t2 (good):     C = max(0.0294·0.7, 0.0378·0.4)·0.55 = 0.02058·0.55 = 0.011319 (from C)
        //                D = max(0.0294·0.3, 0.0378·0.6)·0.1  = 0.02268·0.1  = 0.002268
        // best end C; back: t2 C ← t1 C ← t0 D.
        let m = Model::default();
        assert_eq!(
            m.viterbi(&[Bad, Moderate, Good]),
            vec![Disconnect, Connect, Connect]
        );
        assert_eq!(m.predict(&[Bad, Moderate, Good]), Some(Connect));
    }

    #[test]
    fn fading_link_is_predicted_to_disconnect() {
        let m = Model::default();
        // A link degrading: by hand, the last two "bad" make D the best end state.
        assert_eq!(
            m.predict(&[Good, Good, Moderate, Bad, Bad]),
            Some(Disconnect)
        );
        // A single bad sample after good ones already wins: from a connect-heavy δ, ending in
        // C costs 0.7·0.1 = 0.07 while ending in D costs at least 0.3·0.6 = 0.18.
        assert_eq!(m.predict(&[Good, Good, Good, Good, Bad]), Some(Disconnect));
        assert_eq!(
            m.predict(&[Good, Good, Good, Moderate, Moderate]),
            Some(Connect)
        );
    }

    #[test]
    fn viterbi_matches_brute_force_on_every_short_sequence() {
        let m = Model::default();
        let all = [Good, Moderate, Bad];
        for n in 1..=6 {
            for code in 0..3usize.pow(n) {
                let obs: Vec<Obs> = (0..n).map(|t| all[code / 3usize.pow(t) % 3]).collect();
                assert_eq!(m.viterbi(&obs), brute(&m, &obs), "{obs:?}");
            }
        }
    }

    #[test]
    fn observation_bands() {
        assert_eq!(observe_rss(-85.0, -82.0, 8.0, 3.0), Bad);
        assert_eq!(observe_rss(-79.0, -82.0, 8.0, 3.0), Bad);
        assert_eq!(observe_rss(-77.0, -82.0, 8.0, 3.0), Moderate);
        assert_eq!(observe_rss(-74.0, -82.0, 8.0, 3.0), Good);
        assert_eq!(observe_quality(10000), Good);
        assert_eq!(observe_quality(8000), Moderate);
        assert_eq!(observe_quality(5000), Bad);
    }
}
