//! `limit`/`marker` paging as the OpenStack APIs do it: the page starts after the item whose id
//! is the marker, holds at most `limit` items (capped by the service's maximum), and a `next`
//! link is given when the page is full (Nova, Neutron, Cinder and Octavia all decide it that way).

/// Why a page could not be cut.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// The marker names no item of the (filtered) collection.
    #[error("marker [{0}] not found")]
    MarkerNotFound(String),
    /// `limit` is not a non-negative integer.
    #[error("limit must be a non-negative integer, got {0:?}")]
    BadLimit(String),
}

/// One page: the index range into the collection and the marker for the next page, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// First index (inclusive).
    pub start: usize,
    /// Last index (exclusive).
    pub end: usize,
    /// The id to pass as `marker` for the next page (the page was full).
    pub next_marker: Option<String>,
}

/// Cuts a page out of `ids` (the collection in its listing order). `max` is the service's cap
/// (Nova's `osapi_max_limit`, 1000); a missing limit means `max`. A `limit=0` yields an empty page
/// with no link.
pub fn page(
    ids: &[&str],
    limit: Option<&str>,
    marker: Option<&str>,
    max: usize,
) -> Result<Page, PageError> {
    let limit = match limit {
        None => max,
        Some(text) => text
            .parse::<usize>()
            .map_err(|_| PageError::BadLimit(text.to_owned()))?
            .min(max),
    };
    let start = match marker {
        None => 0,
        Some(m) => {
            ids.iter()
                .position(|id| *id == m)
                .ok_or_else(|| PageError::MarkerNotFound(m.to_owned()))?
                + 1
        }
    };
    let end = (start + limit).min(ids.len());
    let full = limit > 0 && end - start == limit;
    Ok(Page {
        start,
        end,
        next_marker: full.then(|| ids[end - 1].to_owned()),
    })
}

/// The query string of the next page: `query` without its `marker` and `limit`, plus both.
pub fn next_query(query: &[(String, String)], limit: usize, marker: &str) -> String {
    let mut parts: Vec<String> = query
        .iter()
        .filter(|(k, _)| k != "marker" && k != "limit")
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    parts.push(format!("limit={limit}"));
    parts.push(format!("marker={}", encode(marker)));
    parts.join("&")
}

/// Percent-encodes a query component (unreserved characters stay).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_markers_and_links_appear_on_full_pages() {
        let ids = ["a", "b", "c", "d", "e"];
        let cases: &[(Option<&str>, Option<&str>, usize, Result<Page, PageError>)] = &[
            (
                None,
                None,
                1000,
                Ok(Page {
                    start: 0,
                    end: 5,
                    next_marker: None,
                }),
            ),
            (
                Some("2"),
                None,
                1000,
                Ok(Page {
                    start: 0,
                    end: 2,
                    next_marker: Some("b".into()),
                }),
            ),
            (
                Some("2"),
                Some("d"),
                1000,
                Ok(Page {
                    start: 4,
                    end: 5,
                    next_marker: None,
                }),
            ),
            // A full last page still carries a link (the next one is empty).
            (
                Some("1"),
                Some("d"),
                1000,
                Ok(Page {
                    start: 4,
                    end: 5,
                    next_marker: Some("e".into()),
                }),
            ),
            (
                Some("5000"),
                None,
                3,
                Ok(Page {
                    start: 0,
                    end: 3,
                    next_marker: Some("c".into()),
                }),
            ),
            (
                None,
                None,
                3,
                Ok(Page {
                    start: 0,
                    end: 3,
                    next_marker: Some("c".into()),
                }),
            ),
            (
                Some("0"),
                None,
                1000,
                Ok(Page {
                    start: 0,
                    end: 0,
                    next_marker: None,
                }),
            ),
            (Some("x"), None, 1000, Err(PageError::BadLimit("x".into()))),
            (
                Some("-1"),
                None,
                1000,
                Err(PageError::BadLimit("-1".into())),
            ),
            (
                None,
                Some("zz"),
                1000,
                Err(PageError::MarkerNotFound("zz".into())),
            ),
        ];
        for (limit, marker, max, want) in cases {
            assert_eq!(
                &page(&ids, *limit, *marker, *max),
                want,
                "{limit:?} {marker:?}"
            );
        }
    }

    #[test]
    fn next_queries_keep_filters_and_replace_paging() {
        let query = vec![
            ("name".to_owned(), "^node 1$".to_owned()),
            ("marker".to_owned(), "old".to_owned()),
            ("limit".to_owned(), "9".to_owned()),
        ];
        assert_eq!(
            next_query(&query, 2, "abc"),
            "name=%5Enode%201%24&limit=2&marker=abc"
        );
    }
}
