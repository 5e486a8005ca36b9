//! EC2 `DescribeInstanceTypes` paged as EC2 pages it. Moto answers every instance type (over a
//! thousand, about 5 MB of XML) in one answer and ignores `MaxResults`; EC2 answers at most
//! `MaxResults` (5–100 in the EC2 API reference) with a `nextToken` for the rest. With
//! `MaxResults` the proxy asks moto once for the whole list (its own request, not counted), keeps
//! it for the following pages of the same query, and answers page by page; without it the
//! request goes to moto unchanged. A token is opaque to the caller; one the proxy did not hand
//! out is `InvalidParameterValue`, as EC2 answers.

use std::sync::Mutex;

use http::{Response, StatusCode};
use hyper::body::Bytes;

use super::topology::{ask_moto, ec2_error};
use crate::core::proxy::{full, ProxyBody, Upstream};

/// The query paged and moto's whole answer to it, kept for the next pages.
#[derive(Debug, Default)]
pub struct PagedAnswers {
    last: Mutex<Option<(String, String)>>,
}

/// `MaxResults` and `NextToken` of a form, and the form without them.
#[derive(Debug, PartialEq, Eq)]
pub struct PageQuery {
    /// `MaxResults`, when given.
    pub max_results: Option<usize>,
    /// `NextToken`, when given.
    pub next_token: Option<String>,
    /// The other parameters, form-encoded, in their order.
    pub rest: String,
}

/// Splits the paging parameters off a form body.
pub fn page_query(form: &str) -> Result<PageQuery, String> {
    let mut query = PageQuery {
        max_results: None,
        next_token: None,
        rest: String::new(),
    };
    let mut rest = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(form.as_bytes()) {
        match key.as_ref() {
            "MaxResults" => {
                let n: usize = value
                    .parse()
                    .map_err(|_| format!("MaxResults {value:?} is not a number"))?;
                if !(5..=100).contains(&n) {
                    return Err(format!("MaxResults {n} is outside 5..100"));
                }
                query.max_results = Some(n);
            }
            "NextToken" => query.next_token = Some(value.into_owned()),
            _ => {
                rest.append_pair(&key, &value);
            }
        }
    }
    query.rest = rest.finish();
    Ok(query)
}

/// The byte ranges of the top-level `<item>` elements inside `<{set}>` of `xml`, and the range
/// of the set's content. Nested lists use `<item>` too; depth tells them apart.
pub fn items_of(
    xml: &str,
    set: &str,
) -> Option<(std::ops::Range<usize>, Vec<std::ops::Range<usize>>)> {
    let open = format!("<{set}>");
    let close = format!("</{set}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&close)?;
    let mut items = Vec::new();
    let (mut depth, mut at, mut item_start) = (0usize, start, start);
    while let Some(offset) = xml[at..end].find("<") {
        let tag_at = at + offset;
        let rest = &xml[tag_at..end];
        if rest.starts_with("<item>") {
            if depth == 0 {
                item_start = tag_at;
            }
            depth += 1;
            at = tag_at + "<item>".len();
        } else if rest.starts_with("</item>") {
            depth = depth.checked_sub(1)?;
            at = tag_at + "</item>".len();
            if depth == 0 {
                items.push(item_start..at);
            }
        } else {
            at = tag_at + 1;
        }
    }
    (depth == 0).then_some((start..end, items))
}

/// The page of `whole` starting at item `from`, at most `size` items, with a `nextToken` when
/// more follow.
pub fn page_of(whole: &str, set: &str, from: usize, size: usize) -> Option<String> {
    let (content, items) = items_of(whole, set)?;
    let from = from.min(items.len());
    let to = (from + size).min(items.len());
    let mut page = String::with_capacity(whole.len() / items.len().max(1) * (to - from) + 512);
    page.push_str(&whole[..content.start]);
    for item in &items[from..to] {
        page.push_str(&whole[item.clone()]);
    }
    page.push_str(&whole[content.end..]);
    if to < items.len() {
        let close_set = format!("</{set}>");
        let after_set = page.find(&close_set)? + close_set.len();
        page.insert_str(after_set, &format!("<nextToken>page-{to}</nextToken>"));
    }
    Some(page)
}

fn token_offset(token: &str) -> Option<usize> {
    token.strip_prefix("page-")?.parse().ok()
}

impl PagedAnswers {
    /// Answers one `DescribeInstanceTypes` request; `None` when it asks for no paging (the
    /// caller forwards it unchanged).
    pub async fn describe_instance_types(
        &self,
        parts: &http::request::Parts,
        body: &Bytes,
        upstream: &Upstream,
    ) -> Option<Response<ProxyBody>> {
        let form = std::str::from_utf8(body).unwrap_or_default();
        let query = match page_query(form) {
            Ok(q) => q,
            Err(message) => {
                return Some(ec2_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidParameterValue",
                    &message,
                ))
            }
        };
        let size = query.max_results?;
        let from = match &query.next_token {
            None => 0,
            Some(token) => match token_offset(token) {
                Some(n) => n,
                None => {
                    return Some(ec2_error(
                        StatusCode::BAD_REQUEST,
                        "InvalidParameterValue",
                        &format!("invalid NextToken {token:?}"),
                    ))
                }
            },
        };
        let kept = self
            .last
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|(rest, _)| query.next_token.is_some() && *rest == query.rest)
            .map(|(_, whole)| whole.clone());
        let whole = match kept {
            Some(whole) => whole,
            None => match ask_moto(upstream, parts, query.rest.clone()).await {
                Ok(whole) => {
                    *self.last.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((query.rest.clone(), whole.clone()));
                    whole
                }
                Err(message) => {
                    return Some(ec2_error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "InternalError",
                        &message,
                    ))
                }
            },
        };
        Some(match page_of(&whole, "instanceTypeSet", from, size) {
            Some(page) => {
                let mut response = Response::new(full(page.into_bytes()));
                response.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("text/xml"),
                );
                response
            }
            None => ec2_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "moto's answer has no instanceTypeSet",
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHOLE: &str = "<R><instanceTypeSet><item><instanceType>a</instanceType><u><item>x</item><item>y</item></u></item><item><instanceType>b</instanceType></item><item><instanceType>c</instanceType></item></instanceTypeSet><requestId>r</requestId></R>";

    #[test]
    fn paging_parameters_are_split_off_and_checked() {
        let q = page_query(
            "Action=DescribeInstanceTypes&MaxResults=100&NextToken=page-100&Version=2016-11-15",
        )
        .unwrap();
        assert_eq!(q.max_results, Some(100));
        assert_eq!(q.next_token.as_deref(), Some("page-100"));
        assert_eq!(q.rest, "Action=DescribeInstanceTypes&Version=2016-11-15");
        assert!(page_query("MaxResults=4").is_err());
        assert!(page_query("MaxResults=101").is_err());
        assert!(page_query("MaxResults=ten").is_err());
        assert_eq!(page_query("Action=X").unwrap().max_results, None);
    }

    #[test]
    fn only_top_level_items_count() {
        let (_, items) = items_of(WHOLE, "instanceTypeSet").unwrap();
        assert_eq!(items.len(), 3);
        assert!(WHOLE[items[0].clone()].contains("<item>y</item>"));
        assert!(items_of(
            "<R><instanceTypeSet><item></instanceTypeSet></R>",
            "instanceTypeSet"
        )
        .is_none());
    }

    #[test]
    fn pages_carry_a_token_until_the_last() {
        let first = page_of(WHOLE, "instanceTypeSet", 0, 2).unwrap();
        assert!(first.contains("<instanceType>a</instanceType>"));
        assert!(first.contains("<instanceType>b</instanceType>"));
        assert!(!first.contains("<instanceType>c</instanceType>"));
        assert!(first.contains("</instanceTypeSet><nextToken>page-2</nextToken><requestId>"));
        let last = page_of(WHOLE, "instanceTypeSet", 2, 2).unwrap();
        assert!(last.contains("<instanceType>c</instanceType>"));
        assert!(!last.contains("nextToken"));
        assert!(last.ends_with("<requestId>r</requestId></R>"));
        assert_eq!(token_offset("page-7"), Some(7));
        assert_eq!(token_offset("7"), None);
    }
}
