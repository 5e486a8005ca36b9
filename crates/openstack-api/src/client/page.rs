//! One page of a `*_links`-paged collection (or of Glance's, whose top-level `next` is a relative
//! link), read straight from the answer's bytes into typed
//! items: only the collection and its links are kept, every other key (and every field the item
//! type does not name) is skipped while parsing. A page of 1000 Nova servers is never held as a
//! JSON tree, which is what kept a listing's peak memory several times the answer's size.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

/// The items of one page and the query of its `next` link.
#[derive(Debug, PartialEq, Eq)]
pub struct Page<T> {
    /// The page's items.
    pub items: Vec<T>,
    /// The query string of the `rel: next` link (its marker), if any.
    pub next_query: Option<String>,
}

#[derive(Deserialize)]
struct Link {
    #[serde(default)]
    rel: String,
    #[serde(default)]
    href: String,
}

/// Reads `{ "<collection>": [...], "<collection>_links": [...] }` from `bytes`.
pub fn parse_page<T: for<'de> Deserialize<'de>>(
    bytes: &[u8],
    collection: &str,
) -> Result<Page<T>, serde_json::Error> {
    let links_key = format!("{collection}_links");
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let page = PageSeed {
        collection,
        links_key: &links_key,
        items: PhantomData,
    }
    .deserialize(&mut de)?;
    de.end()?;
    Ok(page)
}

struct PageSeed<'a, T> {
    collection: &'a str,
    links_key: &'a str,
    items: PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Page<T>, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for PageSeed<'_, T> {
    type Value = Page<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object with `{}`", self.collection)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Page<T>, A::Error> {
        let mut items = None;
        let mut next_query = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == self.collection {
                items = Some(map.next_value::<Vec<T>>()?);
            } else if key == self.links_key {
                let links: Vec<Link> = map.next_value()?;
                next_query = links
                    .into_iter()
                    .find(|l| l.rel == "next")
                    .and_then(|l| l.href.split_once('?').map(|(_, q)| q.to_owned()));
            } else if key == "next" {
                // Glance v2: `"next": "/v2/images?marker=…"`.
                let href: Option<String> = map.next_value()?;
                next_query = href.and_then(|h| h.split_once('?').map(|(_, q)| q.to_owned()));
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        let items = items
            .ok_or_else(|| A::Error::custom(format!("no `{}` in the answer", self.collection)))?;
        Ok(Page { items, next_query })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq, Deserialize)]
    struct Item {
        id: String,
    }

    #[test]
    fn reads_items_and_the_next_query_and_skips_the_rest() {
        let body = br#"{"servers": [{"id": "a", "name": "x", "addresses": {"n": [{"addr": "10.0.0.1"}]}}, {"id": "b"}],
            "extra": {"deep": [1, 2, {"x": null}]},
            "servers_links": [{"rel": "previous", "href": "http://x/v2.1/servers/detail?marker=z"},
                              {"rel": "next", "href": "http://nova.internal:8774/v2.1/servers/detail?limit=2&marker=b"}]}"#;
        let page: Page<Item> = parse_page(body, "servers").unwrap();
        assert_eq!(
            page.items,
            vec![Item { id: "a".into() }, Item { id: "b".into() }]
        );
        assert_eq!(page.next_query.as_deref(), Some("limit=2&marker=b"));
    }

    #[test]
    fn a_last_page_has_no_next_and_a_wrong_answer_is_an_error() {
        let page: Page<Item> = parse_page(br#"{"ports": []}"#, "ports").unwrap();
        assert_eq!(
            page,
            Page {
                items: vec![],
                next_query: None
            }
        );
        let err = parse_page::<Item>(br#"{"server": {"id": "a"}}"#, "servers").unwrap_err();
        assert!(err.to_string().contains("no `servers`"), "{err}");
        assert!(parse_page::<Item>(br#"{"servers": [{"id": 1}]}"#, "servers").is_err());
        assert!(parse_page::<Item>(br#"{"servers": []} trailing"#, "servers").is_err());
    }

    #[test]
    fn glance_pages_carry_a_relative_next_link() {
        let body = br#"{"images": [{"id": "a"}], "first": "/v2/images", "next": "/v2/images?limit=1&marker=a", "schema": "/v2/schemas/images"}"#;
        let page: Page<Item> = parse_page(body, "images").unwrap();
        assert_eq!(page.next_query.as_deref(), Some("limit=1&marker=a"));
        let last: Page<Item> =
            parse_page(br#"{"images": [], "first": "/v2/images"}"#, "images").unwrap();
        assert_eq!(last.next_query, None);
    }

    #[test]
    fn escaped_keys_are_matched() {
        let page: Page<Item> =
            parse_page(br#"{"serv\u0065rs": [{"id": "a"}]}"#, "servers").unwrap();
        assert_eq!(page.items.len(), 1);
    }
}
