//! The kubelet's registration calls made acceptable to tonic. The kubelet dials a plugin's
//! registration socket by its bare path, so its gRPC client sends that path (`/var/lib/kubelet/
//! plugins_registry/….sock`) as the HTTP/2 `:authority`; h2, under tonic, refuses such a request
//! with `RST_STREAM PROTOCOL_ERROR` and the kubelet never registers the driver. Each accepted
//! connection is relayed through [`relay`], which re-encodes every header block the client sends
//! with an `:authority` that is not a valid authority replaced by `localhost` (what the kubelet's
//! CSI client itself sends since Kubernetes 1.26); everything else passes byte for byte.

use fluke_hpack::{Decoder, Encoder};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The frame size every HTTP/2 peer accepts (SETTINGS_MAX_FRAME_SIZE's initial value).
const MAX_FRAME: usize = 16_384;
/// What replaces an invalid `:authority`.
pub const LOCALHOST: &str = "localhost";

/// Relays `client` (accepted from the registration socket) to a new stream returned for the
/// gRPC server, fixing the client's header blocks on the way in.
pub fn relay(client: UnixStream) -> std::io::Result<UnixStream> {
    let (ours, server) = UnixStream::pair()?;
    tokio::spawn(async move {
        let (client_read, mut client_write) = client.into_split();
        let (mut ours_read, ours_write) = ours.into_split();
        let inbound = rewrite(client_read, ours_write);
        let outbound = async move {
            let copied = tokio::io::copy(&mut ours_read, &mut client_write).await;
            let _ = client_write.shutdown().await;
            copied.map(|_| ())
        };
        if let Err(e) = tokio::try_join!(inbound, outbound) {
            tracing::debug!("registration connection ended: {e}");
        }
    });
    Ok(server)
}

/// Copies the client's frames from `from` to `to`, re-encoding header blocks (see the module).
pub async fn rewrite<R, W>(mut from: R, mut to: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut preface = [0u8; 24];
    from.read_exact(&mut preface).await?;
    if &preface != PREFACE {
        return Err(invalid("not an HTTP/2 connection preface"));
    }
    to.write_all(&preface).await?;
    let mut decoder = Decoder::new();
    let mut encoder = Encoder::new();
    // A header block split over HEADERS and CONTINUATION frames: stream, END_STREAM, fragments.
    let mut pending: Option<(u32, u8, Vec<u8>)> = None;
    loop {
        let mut head = [0u8; 9];
        match from.read_exact(&mut head).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let length = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; length];
        from.read_exact(&mut payload).await?;
        let block_done = match (kind, pending.as_mut()) {
            (HEADERS, None) => {
                let fragment = headers_fragment(&payload, flags)?;
                pending = Some((stream, flags & END_STREAM, fragment.to_vec()));
                flags & END_HEADERS != 0
            }
            (CONTINUATION, Some((open, _, block))) if *open == stream => {
                block.extend_from_slice(&payload);
                flags & END_HEADERS != 0
            }
            (_, Some(_)) => return Err(invalid("a frame interrupted a header block")),
            (_, None) => {
                to.write_all(&head).await?;
                to.write_all(&payload).await?;
                continue;
            }
        };
        if block_done {
            let (stream, end_stream, block) = pending.take().expect("a header block is open");
            let fixed = fix_block(&mut decoder, &mut encoder, &block)?;
            write_block(&mut to, stream, end_stream, &fixed).await?;
        }
    }
    to.shutdown().await
}

/// The header block fragment of a HEADERS frame, without padding and priority fields.
fn headers_fragment(payload: &[u8], flags: u8) -> std::io::Result<&[u8]> {
    let mut start = 0;
    let mut end = payload.len();
    if flags & PADDED != 0 {
        let pad = *payload
            .first()
            .ok_or_else(|| invalid("empty padded HEADERS"))? as usize;
        start = 1;
        end = end
            .checked_sub(pad)
            .ok_or_else(|| invalid("HEADERS padding longer than the frame"))?;
    }
    if flags & PRIORITY != 0 {
        start += 5;
    }
    payload
        .get(start..end)
        .ok_or_else(|| invalid("HEADERS shorter than its fields"))
}

/// Decodes a block, replaces an invalid `:authority`, encodes it again.
pub fn fix_block(
    decoder: &mut Decoder<'_>,
    encoder: &mut Encoder<'_>,
    block: &[u8],
) -> std::io::Result<Vec<u8>> {
    let headers = decoder
        .decode(block)
        .map_err(|e| invalid(&format!("undecodable header block: {e:?}")))?;
    let fixed: Vec<(Vec<u8>, Vec<u8>)> = headers
        .into_iter()
        .map(|(name, value)| {
            if name == b":authority" && http::uri::Authority::try_from(value.as_slice()).is_err() {
                (name, LOCALHOST.as_bytes().to_vec())
            } else {
                (name, value)
            }
        })
        .collect();
    Ok(encoder.encode(fixed.iter().map(|(n, v)| (n.as_slice(), v.as_slice()))))
}

/// Writes a header block as one HEADERS frame and as many CONTINUATION frames as it needs.
async fn write_block<W: AsyncWrite + Unpin>(
    to: &mut W,
    stream: u32,
    end_stream: u8,
    block: &[u8],
) -> std::io::Result<()> {
    let chunks: Vec<&[u8]> = if block.is_empty() {
        vec![block]
    } else {
        block.chunks(MAX_FRAME).collect()
    };
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.into_iter().enumerate() {
        let kind = if i == 0 { HEADERS } else { CONTINUATION };
        let mut flags = if i == 0 { end_stream } else { 0 };
        if i == last {
            flags |= END_HEADERS;
        }
        let len = (chunk.len() as u32).to_be_bytes();
        let id = stream.to_be_bytes();
        let head = [
            len[1], len[2], len[3], kind, flags, id[0], id[1], id[2], id[3],
        ];
        to.write_all(&head).await?;
        to.write_all(chunk).await?;
    }
    Ok(())
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = (payload.len() as u32).to_be_bytes();
        let id = stream.to_be_bytes();
        let mut f = vec![
            len[1], len[2], len[3], kind, flags, id[0], id[1], id[2], id[3],
        ];
        f.extend_from_slice(payload);
        f
    }

    type Fields = Vec<(Vec<u8>, Vec<u8>)>;

    fn request(authority: &str) -> Fields {
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/pluginregistration.Registration/GetInfo"),
            (":authority", authority),
            ("content-type", "application/grpc"),
        ]
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
    }

    /// Runs `input` through [`rewrite`] and returns what reached the server side.
    async fn rewritten(input: Vec<u8>) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        rewrite(input.as_slice(), &mut out).await?;
        Ok(out)
    }

    /// The header blocks and other frames of `bytes` (after the preface), blocks decoded.
    fn frames(bytes: &[u8]) -> Vec<(u8, u8, Fields, Vec<u8>)> {
        let mut decoder = Decoder::new();
        let mut at = PREFACE.len();
        let mut out = Vec::new();
        while at < bytes.len() {
            let len = u32::from_be_bytes([0, bytes[at], bytes[at + 1], bytes[at + 2]]) as usize;
            let (kind, flags) = (bytes[at + 3], bytes[at + 4]);
            let payload = bytes[at + 9..at + 9 + len].to_vec();
            let headers = if kind == HEADERS {
                decoder.decode(&payload).unwrap()
            } else {
                Vec::new()
            };
            out.push((kind, flags, headers, payload));
            at += 9 + len;
        }
        out
    }

    #[tokio::test]
    async fn a_socket_path_authority_becomes_localhost_and_the_rest_passes() {
        let mut client = Encoder::new();
        let path = "/var/lib/kubelet/plugins_registry/ebs.csi.aws.com-reg.sock";
        let first = client.encode(request(path).iter().map(|(n, v)| (&n[..], &v[..])));
        // The second request reuses the client's dynamic table (indexed fields).
        let second = client.encode(request(path).iter().map(|(n, v)| (&n[..], &v[..])));
        let mut input = PREFACE.to_vec();
        input.extend(frame(0x4, 0, 0, &[])); // SETTINGS
                                             // A padded HEADERS frame with a priority, its block split over a CONTINUATION.
        let (a, b) = first.split_at(first.len() / 2);
        let mut padded = vec![3u8, 0, 0, 0, 0, 16];
        padded.extend_from_slice(a);
        padded.extend_from_slice(&[0, 0, 0]);
        input.extend(frame(HEADERS, PADDED | PRIORITY, 1, &padded));
        input.extend(frame(CONTINUATION, END_HEADERS, 1, b));
        input.extend(frame(0x0, END_STREAM, 1, b"\0\0\0\0\x05hello"));
        input.extend(frame(HEADERS, END_HEADERS | END_STREAM, 3, &second));

        let out = rewritten(input).await.unwrap();
        assert_eq!(&out[..24], PREFACE);
        let frames = frames(&out);
        let kinds: Vec<_> = frames.iter().map(|f| (f.0, f.1)).collect();
        assert_eq!(
            kinds,
            [
                (0x4, 0),
                (HEADERS, END_HEADERS),
                (0x0, END_STREAM),
                (HEADERS, END_HEADERS | END_STREAM)
            ]
        );
        for block in [&frames[1].2, &frames[3].2] {
            assert_eq!(block, &request(LOCALHOST));
        }
        assert_eq!(frames[2].3, b"\0\0\0\0\x05hello");
    }

    #[tokio::test]
    async fn a_valid_authority_is_kept_and_garbage_is_refused() {
        let mut client = Encoder::new();
        let block = client.encode(
            request("localhost:50051")
                .iter()
                .map(|(n, v)| (&n[..], &v[..])),
        );
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, END_HEADERS, 1, &block));
        let out = rewritten(input).await.unwrap();
        assert_eq!(frames(&out)[0].2, request("localhost:50051"));

        assert!(rewritten(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec())
            .await
            .is_err());
        let mut interrupted = PREFACE.to_vec();
        interrupted.extend(frame(HEADERS, 0, 1, &block[..2]));
        interrupted.extend(frame(0x0, 0, 1, b"x"));
        assert!(rewritten(interrupted).await.is_err());
    }
}
