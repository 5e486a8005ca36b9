//! Paging of ListVolumes/ListSnapshots: the token is the index of the next entry; a token that
//! does not parse or points past the end is Aborted, as the spec asks.

use tonic::Status;

/// The page of `items` starting at `token` with at most `max_entries` (0: all), and the next
/// token (empty at the end).
pub fn page<T: Clone>(
    items: &[T],
    token: &str,
    max_entries: i32,
) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(Status::invalid_argument("max_entries must not be negative"));
    }
    let start = if token.is_empty() {
        0
    } else {
        token
            .parse::<usize>()
            .ok()
            .filter(|i| *i <= items.len())
            .ok_or_else(|| Status::aborted(format!("starting_token {token:?} is not valid")))?
    };
    let end = if max_entries == 0 {
        items.len()
    } else {
        (start + max_entries as usize).min(items.len())
    };
    let next = if end < items.len() {
        end.to_string()
    } else {
        String::new()
    };
    Ok((items[start..end].to_vec(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_table() {
        let items: Vec<u32> = (0..5).collect();
        assert_eq!(page(&items, "", 0).unwrap(), (items.clone(), String::new()));
        assert_eq!(page(&items, "", 2).unwrap(), (vec![0, 1], "2".into()));
        assert_eq!(page(&items, "2", 2).unwrap(), (vec![2, 3], "4".into()));
        assert_eq!(page(&items, "4", 2).unwrap(), (vec![4], String::new()));
        assert_eq!(
            page(&items, "x", 2).unwrap_err().code(),
            tonic::Code::Aborted
        );
        assert_eq!(
            page(&items, "9", 2).unwrap_err().code(),
            tonic::Code::Aborted
        );
        assert!(page(&items, "", -1).is_err());
    }
}
