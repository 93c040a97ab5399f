//! [`RuleMap`]: the per-session rule tables (PDR / FAR / QER / URR by rule ID, TS 29.244
//! section 5.2) as one sorted `Vec` of (id, rule).
//!
//! A session holds a handful of rules of each kind (typically one or two). A `BTreeMap`
//! allocates a whole leaf node (room for 11 entries) for the first one, which made an N4
//! session cost ~6.5 KiB; a sorted `Vec` grown one slot at a time holds exactly what is
//! there. Lookups are a binary search over a few entries. The API is the subset of
//! `BTreeMap`'s the crate uses, with the same semantics (ascending key order everywhere).

use std::borrow::Borrow;

/// A map from rule ID to rule kept as a sorted, exactly sized `Vec`.
#[derive(Clone, PartialEq, Eq)]
pub struct RuleMap<K, V> {
    v: Vec<(K, V)>,
}

impl<K, V> Default for RuleMap<K, V> {
    fn default() -> Self {
        RuleMap { v: Vec::new() }
    }
}

impl<K: std::fmt::Debug, V: std::fmt::Debug> std::fmt::Debug for RuleMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.v.iter().map(|(k, v)| (k, v)))
            .finish()
    }
}

impl<K: Ord, V> RuleMap<K, V> {
    pub const fn new() -> Self {
        RuleMap { v: Vec::new() }
    }

    fn find<Q: Ord + ?Sized>(&self, k: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        self.v.binary_search_by(|(x, _)| x.borrow().cmp(k))
    }

    pub fn len(&self) -> usize {
        self.v.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    pub fn get<Q: Ord + ?Sized>(&self, k: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(k).ok().map(|i| &self.v[i].1)
    }

    pub fn get_mut<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(k).ok().map(move |i| &mut self.v[i].1)
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, k: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(k).is_ok()
    }

    /// Inserts or replaces; returns the previous value, as `BTreeMap::insert`.
    pub fn insert(&mut self, k: K, val: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.v[i].1, val)),
            Err(i) => {
                // Exact growth: a session has a few rules, so the quadratic worst case is
                // moot and no slack capacity is carried per session.
                self.v.reserve_exact(1);
                self.v.insert(i, (k, val));
                None
            }
        }
    }

    pub fn remove<Q: Ord + ?Sized>(&mut self, k: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let i = self.find(k).ok()?;
        let (_, val) = self.v.remove(i);
        if self.v.capacity() > self.v.len() + 4 {
            self.v.shrink_to_fit();
        }
        Some(val)
    }

    /// (id, rule) in ascending id order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator + Clone {
        self.v.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&K, &mut V)> + ExactSizeIterator {
        self.v.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator + Clone {
        self.v.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator + Clone {
        self.v.iter().map(|(_, v)| v)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator {
        self.v.iter_mut().map(|(_, v)| v)
    }

    /// Heap bytes held (for memory accounting).
    pub fn heap_bytes(&self) -> usize {
        self.v.capacity() * std::mem::size_of::<(K, V)>()
    }
}

impl<K: Ord, V, Q: Ord + ?Sized> std::ops::Index<&Q> for RuleMap<K, V>
where
    K: Borrow<Q>,
{
    type Output = V;
    fn index(&self, k: &Q) -> &V {
        self.get(k).expect("no entry found for key")
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for RuleMap<K, V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(it: I) -> Self {
        let mut m = RuleMap::new();
        for (k, v) in it {
            m.insert(k, v);
        }
        m
    }
}

impl<K: Ord, V, const N: usize> From<[(K, V); N]> for RuleMap<K, V> {
    fn from(a: [(K, V); N]) -> Self {
        a.into_iter().collect()
    }
}

impl<'a, K, V> IntoIterator for &'a RuleMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.v.iter().map(|(k, v)| (k, v))
    }
}

impl<K, V> IntoIterator for RuleMap<K, V> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.v.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn behaves_like_btreemap() {
        // The same operation sequence on both must give the same answers and contents.
        let mut r: RuleMap<u32, u64> = RuleMap::new();
        let mut b: BTreeMap<u32, u64> = BTreeMap::new();
        let mut x = 0x9e37_79b9_u64;
        for step in 0..2000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = ((x >> 33) % 23) as u32;
            match (x >> 20) % 4 {
                0 | 1 => assert_eq!(r.insert(k, step), b.insert(k, step)),
                2 => assert_eq!(r.remove(&k), b.remove(&k)),
                _ => {
                    assert_eq!(r.get(&k), b.get(&k));
                    if let (Some(a), Some(c)) = (r.get_mut(&k), b.get_mut(&k)) {
                        *a += 1;
                        *c += 1;
                    }
                }
            }
            assert_eq!(r.len(), b.len());
            assert!(r.iter().eq(b.iter()));
        }
        assert!(r.keys().eq(b.keys()) && r.values().eq(b.values()));
    }

    #[test]
    fn one_rule_holds_one_slot() {
        let mut r: RuleMap<u16, [u8; 100]> = RuleMap::new();
        r.insert(7, [0; 100]);
        assert_eq!(r.heap_bytes(), std::mem::size_of::<(u16, [u8; 100])>());
        assert_eq!(r[&7][0], 0);
        assert!(r.contains_key(&7) && !r.contains_key(&8));
        let m: RuleMap<u16, u8> = RuleMap::from([(3, 1), (1, 2), (3, 4)]);
        assert_eq!(m.iter().collect::<Vec<_>>(), [(&1, &2), (&3, &4)]);
    }
}
