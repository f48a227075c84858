//! A set of `u64` as sorted, disjoint, non-adjacent half-open ranges: received sequence numbers
//! above the cumulative point, at the subflow and connection level.

/// Sorted disjoint half-open ranges `[start, end)`; adjacent ranges are merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeSet {
    ranges: Vec<(u64, u64)>,
}

impl RangeSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of disjoint ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Total count of values in the set.
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, u64)> + Clone + '_ {
        self.ranges.iter().copied()
    }

    pub fn first(&self) -> Option<(u64, u64)> {
        self.ranges.first().copied()
    }

    pub fn last(&self) -> Option<(u64, u64)> {
        self.ranges.last().copied()
    }

    pub fn contains(&self, v: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= v);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= v)
    }

    /// Whether inserting `v` adds no range: `v` is in a range or next to one.
    pub fn touches(&self, v: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e < v);
        self.ranges
            .get(i)
            .is_some_and(|&(s, _)| s <= v.saturating_add(1))
    }

    /// Whether every value of `[start, end)` is in the set.
    pub fn contains_range(&self, start: u64, end: u64) -> bool {
        if start >= end {
            return true;
        }
        let i = self.ranges.partition_point(|&(_, e)| e <= start);
        self.ranges
            .get(i)
            .is_some_and(|&(s, e)| s <= start && end <= e)
    }

    /// The first range that ends after `v` (it may contain `v` or lie above it).
    pub fn first_ending_after(&self, v: u64) -> Option<(u64, u64)> {
        let i = self.ranges.partition_point(|&(_, e)| e <= v);
        self.ranges.get(i).copied()
    }

    /// The sub-ranges of `[start, end)` not in the set, ascending.
    pub fn gaps(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut cursor = start;
        let mut i = self.ranges.partition_point(|&(_, e)| e <= start);
        while cursor < end {
            match self.ranges.get(i) {
                Some(&(s, e)) if s <= cursor => {
                    cursor = e;
                    i += 1;
                }
                Some(&(s, _)) => {
                    out.push((cursor, s.min(end)));
                    cursor = s;
                }
                None => {
                    out.push((cursor, end));
                    cursor = end;
                }
            }
        }
        out
    }

    /// Inserts `[start, end)`; returns how many values were new.
    pub fn insert(&mut self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        // First range that ends at or after `start` (may merge, adjacency included).
        let i = self.ranges.partition_point(|&(_, e)| e < start);
        // First range that starts after `end` (cannot merge).
        let j = self.ranges.partition_point(|&(s, _)| s <= end);
        if i == j {
            self.ranges.insert(i, (start, end));
            return end - start;
        }
        let covered: u64 = self.ranges[i..j]
            .iter()
            .map(|&(s, e)| e.min(end).saturating_sub(s.max(start)))
            .sum();
        let new_start = start.min(self.ranges[i].0);
        let new_end = end.max(self.ranges[j - 1].1);
        self.ranges[i] = (new_start, new_end);
        self.ranges.drain(i + 1..j);
        (end - start) - covered
    }

    /// Removes every value below `v`.
    pub fn remove_below(&mut self, v: u64) {
        let i = self.ranges.partition_point(|&(_, e)| e <= v);
        self.ranges.drain(..i);
        if let Some(first) = self.ranges.first_mut() {
            first.0 = first.0.max(v);
        }
    }

    /// If the set starts exactly at `v`, removes that first range and returns its end.
    pub fn pop_contiguous_from(&mut self, v: u64) -> Option<u64> {
        match self.ranges.first() {
            Some(&(s, e)) if s <= v && e > v => {
                self.ranges.remove(0);
                Some(e)
            }
            _ => None,
        }
    }

    /// The number of values in the set that are ≥ `v`.
    pub fn count_from(&self, v: u64) -> u64 {
        self.ranges
            .iter()
            .map(|&(s, e)| e.saturating_sub(s.max(v)))
            .sum()
    }

    pub fn clear(&mut self) {
        self.ranges.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn merges_adjacent_and_overlapping() {
        let mut s = RangeSet::new();
        assert_eq!(s.insert(5, 10), 5);
        assert_eq!(s.insert(10, 12), 2);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(5, 12)]);
        assert_eq!(s.insert(0, 3), 3);
        assert_eq!(s.insert(2, 6), 2);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(0, 12)]);
        s.remove_below(4);
        assert_eq!(s.first(), Some((4, 12)));
        assert!(s.contains_range(4, 12));
        assert!(!s.contains_range(3, 12));
    }

    proptest! {
        #[test]
        fn behaves_like_a_set(ops in prop::collection::vec((0u64..200, 1u64..20, any::<bool>()), 0..60)) {
            let mut s = RangeSet::new();
            let mut model = BTreeSet::new();
            for (start, len, cut) in ops {
                if cut {
                    s.remove_below(start);
                    model.retain(|&v| v >= start);
                } else {
                    let new = (start..start + len).filter(|v| model.insert(*v)).count() as u64;
                    prop_assert_eq!(s.insert(start, start + len), new);
                }
                prop_assert_eq!(s.count(), model.len() as u64);
                for (a, b) in s.iter().zip(s.iter().skip(1)) {
                    prop_assert!(a.1 < b.0, "ranges must be disjoint and non-adjacent");
                }
                for v in 0..230 {
                    prop_assert_eq!(s.contains(v), model.contains(&v));
                    // Inserting a value that touches the set adds no range.
                    let mut t = s.clone();
                    t.insert(v, v + 1);
                    prop_assert_eq!(s.touches(v), t.len() <= s.len(), "{}", v);
                }
                let gaps = s.gaps(start, start + 2 * len);
                let expect: Vec<u64> = (start..start + 2 * len).filter(|v| !model.contains(v)).collect();
                let got: Vec<u64> = gaps.iter().flat_map(|&(a, b)| a..b).collect();
                prop_assert_eq!(got, expect);
            }
        }
    }
}
