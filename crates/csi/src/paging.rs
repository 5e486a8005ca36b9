//! Paging of ListVolumes/ListSnapshots over a list sorted by ID: the token names the last ID
//! returned (`after:<id>`), so an entry deleted or added between pages never shifts the next
//! page; a token that does not have that form is Aborted, as the spec asks.

use tonic::Status;

const PREFIX: &str = "after:";

/// The page of `items` (sorted by `id`) after `token` with at most `max_entries` (0: all), and
/// the next token (empty at the end).
pub fn page<T: Clone>(
    items: &[T],
    id: impl Fn(&T) -> &str,
    token: &str,
    max_entries: i32,
) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(Status::invalid_argument("max_entries must not be negative"));
    }
    let start = if token.is_empty() {
        0
    } else {
        let after = token
            .strip_prefix(PREFIX)
            .filter(|a| !a.is_empty())
            .ok_or_else(|| Status::aborted(format!("starting_token {token:?} is not valid")))?;
        items.partition_point(|i| id(i) <= after)
    };
    let end = if max_entries == 0 {
        items.len()
    } else {
        (start + max_entries as usize).min(items.len())
    };
    let next = if end < items.len() && end > start {
        format!("{PREFIX}{}", id(&items[end - 1]))
    } else {
        String::new()
    };
    Ok((items[start..end].to_vec(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn paging_table() {
        let items = ids(&["a", "b", "c", "d", "e"]);
        let p = |t: &str, m| page(&items, |s: &String| s.as_str(), t, m);
        assert_eq!(p("", 0).unwrap(), (items.clone(), String::new()));
        assert_eq!(p("", 2).unwrap(), (ids(&["a", "b"]), "after:b".into()));
        assert_eq!(
            p("after:b", 2).unwrap(),
            (ids(&["c", "d"]), "after:d".into())
        );
        assert_eq!(p("after:d", 2).unwrap(), (ids(&["e"]), String::new()));
        assert_eq!(p("x", 2).unwrap_err().code(), tonic::Code::Aborted);
        assert_eq!(p("after:", 2).unwrap_err().code(), tonic::Code::Aborted);
        assert!(p("", -1).is_err());
        // The last entry of a page deleted before the next call: nothing is skipped.
        let fewer = ids(&["a", "c", "d", "e"]);
        let (next, _) = page(&fewer, |s: &String| s.as_str(), "after:b", 2).unwrap();
        assert_eq!(next, ids(&["c", "d"]));
    }
}
