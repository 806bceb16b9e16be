use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A list that JAXB-style JSON may write as a bare object when it has one element
/// (`{"entry":{"key":"a"}}` as well as `{"entry":[{"key":"a"}]}`). Always serialized as a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneOrMany<T>(pub Vec<T>);

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<T: Serialize> Serialize for OneOrMany<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either<T> {
            Many(Vec<T>),
            One(T),
            Null(()),
        }
        Ok(match Either::<T>::deserialize(d)? {
            Either::Many(v) => OneOrMany(v),
            Either::One(t) => OneOrMany(vec![t]),
            Either::Null(()) => OneOrMany(Vec::new()),
        })
    }
}

impl<T> From<Vec<T>> for OneOrMany<T> {
    fn from(v: Vec<T>) -> Self {
        Self(v)
    }
}
