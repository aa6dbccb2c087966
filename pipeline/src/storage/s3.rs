//! S3 backend: aws-sdk-s3 on a private tokio runtime, behind blocking calls.
//!
//! Retries are ours, not the SDK's: every request (and every resumed body stream) goes
//! through [`S3::retry`], which retries transient faults (5xx, `SlowDown` and other
//! throttling, connection resets, timeouts) with exponential backoff and full jitter, a
//! bounded number of times, and fails at once on anything else with the URL in the
//! message. One policy covers requests and mid-body failures alike.

use std::future::Future;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::{Bytes, BytesMut};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use super::{Location, ObjectMeta, ObjectWriter};
use crate::error::{Error, Result};

/// Tuning of the S3 backend. The defaults suit a fleet worker; tests shorten the waits.
#[derive(Debug, Clone)]
pub struct S3Options {
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// Backoff before the second attempt; it doubles each time, up to `max_backoff`.
    pub base_backoff: Duration,
    /// Upper bound of one backoff wait.
    pub max_backoff: Duration,
    /// Multipart part size in bytes (S3's minimum is 5 MiB, except for the last part).
    pub part_bytes: usize,
    /// Parts of one upload in flight at once; memory is bounded by
    /// `part_bytes * (part_concurrency + 1)` per writer.
    pub part_concurrency: usize,
    /// Time allowed to establish a connection.
    pub connect_timeout: Duration,
    /// Time allowed between bytes of a response.
    pub read_timeout: Duration,
    /// Path-style addressing (`endpoint/bucket/key`). `None` means: on when a custom
    /// endpoint is configured (`AWS_ENDPOINT_URL`), as S3-compatible servers expect,
    /// unless `AWS_S3_FORCE_PATH_STYLE=false`.
    pub path_style: Option<bool>,
    /// Endpoint of an S3-compatible server; `None` uses the AWS configuration
    /// (`AWS_ENDPOINT_URL`, profiles) or AWS itself.
    pub endpoint: Option<String>,
}

impl Default for S3Options {
    fn default() -> Self {
        S3Options {
            max_attempts: 10,
            base_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(20),
            part_bytes: 16 << 20,
            part_concurrency: 4,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            path_style: None,
            endpoint: None,
        }
    }
}

pub(super) struct S3 {
    shared: Arc<Shared>,
}

struct Shared {
    rt: Runtime,
    client: Client,
    options: S3Options,
}

/// What one attempt's failure means.
struct Failure {
    transient: bool,
    message: String,
}

impl Failure {
    fn permanent(message: impl Into<String>) -> Self {
        Failure {
            transient: false,
            message: message.into(),
        }
    }
}

fn classify<E>(err: SdkError<E, HttpResponse>) -> Failure
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let transient = match &err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = service.err().code().unwrap_or("");
            status >= 500
                || status == 429
                || matches!(
                    code,
                    "SlowDown"
                        | "Throttling"
                        | "ThrottlingException"
                        | "RequestTimeout"
                        | "InternalError"
                        | "ServiceUnavailable"
                )
        }
        _ => false,
    };
    let message = match &err {
        // The server's answer in a line: status, code and message. Not the SDK's dump
        // of the whole response, whose headers and body may echo the request.
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let code = service.err().code().unwrap_or(match status {
                301 => "PermanentRedirect",
                400 => "BadRequest",
                401 => "Unauthorized",
                403 => "AccessDenied",
                404 => "NotFound",
                _ => "no error code",
            });
            match service.err().message() {
                Some(m) if !m.is_empty() => format!("HTTP {status} {code}: {m}"),
                _ => format!("HTTP {status} {code}"),
            }
        }
        _ => DisplayErrorContext(&err).to_string(),
    };
    Failure { transient, message }
}

/// A key of a listing asked for with `encoding-type=url`: `+` for a space, the rest
/// percent-encoded.
fn decode_listed_key(k: &str) -> String {
    let spaced = k.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

fn is_not_found<E>(err: &SdkError<E, HttpResponse>) -> bool
where
    E: ProvideErrorMetadata,
{
    match err {
        SdkError::ServiceError(service) => {
            service.raw().status().as_u16() == 404
                || matches!(service.err().code(), Some("NoSuchKey" | "NotFound"))
        }
        _ => false,
    }
}

impl S3 {
    pub(super) fn connect(options: &S3Options) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tokenmill-s3")
            .enable_all()
            .build()
            .map_err(|e| Error::S3 {
                op: "starting the S3 runtime",
                url: "s3://".into(),
                message: e.to_string(),
            })?;
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let timeouts = TimeoutConfig::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .build();
        let sdk = rt.block_on(
            aws_config::defaults(aws_config::BehaviorVersion::latest())
                .http_client(http)
                .timeout_config(timeouts.clone())
                .load(),
        );
        let custom_endpoint = sdk.endpoint_url().is_some() || options.endpoint.is_some();
        let env_path_style = std::env::var("AWS_S3_FORCE_PATH_STYLE")
            .ok()
            .map(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true" | "yes"));
        let path_style = options
            .path_style
            .or(env_path_style)
            .unwrap_or(custom_endpoint);
        let mut config = aws_sdk_s3::config::Builder::from(&sdk);
        if let Some(endpoint) = &options.endpoint {
            config = config.endpoint_url(endpoint);
        }
        if sdk.region().is_none() {
            // S3-compatible servers ignore the region but the signer needs one.
            config = config.region(aws_sdk_s3::config::Region::new("us-east-1"));
        }
        let config = config
            .force_path_style(path_style)
            .retry_config(RetryConfig::disabled())
            .timeout_config(timeouts)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            .build();
        Ok(S3 {
            shared: Arc::new(Shared {
                rt,
                client: Client::from_conf(config),
                options: options.clone(),
            }),
        })
    }

    pub(super) fn list(&self, bucket: &str, key: &str) -> Result<Vec<ObjectMeta>> {
        let base = Location::S3 {
            bucket: bucket.into(),
            key: key.into(),
        };
        if !key.is_empty()
            && !key.ends_with('/')
            && let Some(single) = self.head(bucket, key)?
        {
            return Ok(vec![single]);
        }
        let prefix = if key.is_empty() || key.ends_with('/') {
            key.to_string()
        } else {
            format!("{key}/")
        };
        let shared = &self.shared;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = shared.block_on_retry("listing", &base, || {
                let req = shared
                    .client
                    .list_objects_v2()
                    .bucket(bucket)
                    .prefix(&prefix)
                    // Keys come back percent-encoded: a key with a control character
                    // cannot be written in the listing's XML otherwise.
                    .encoding_type(aws_sdk_s3::types::EncodingType::Url)
                    .set_continuation_token(token.clone());
                async move { req.send().await.map_err(classify) }
            })?;
            for obj in page.contents() {
                let Some(k) = obj.key() else { continue };
                let k = decode_listed_key(k);
                let Some(relative) = k.strip_prefix(&prefix) else {
                    continue;
                };
                let relative = relative.to_string();
                out.push(ObjectMeta {
                    location: Location::S3 {
                        bucket: bucket.into(),
                        key: k.clone(),
                    },
                    relative,
                    size: obj.size().unwrap_or(0).max(0) as u64,
                    etag: obj.e_tag().map(str::to_string),
                });
            }
            match page.next_continuation_token() {
                Some(t) if page.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => break,
            }
        }
        Ok(out)
    }

    pub(super) fn head(&self, bucket: &str, key: &str) -> Result<Option<ObjectMeta>> {
        let loc = Location::S3 {
            bucket: bucket.into(),
            key: key.into(),
        };
        let shared = &self.shared;
        let res = shared.block_on_retry("inspecting", &loc, || {
            let req = shared.client.head_object().bucket(bucket).key(key);
            async move {
                match req.send().await {
                    Ok(out) => Ok(Some(out)),
                    Err(e) if is_not_found(&e) => Ok(None),
                    Err(e) => Err(classify(e)),
                }
            }
        })?;
        Ok(res.map(|out| ObjectMeta {
            location: loc.clone(),
            relative: String::new(),
            size: out.content_length().unwrap_or(0).max(0) as u64,
            etag: out.e_tag().map(str::to_string),
        }))
    }

    pub(super) fn open_from(
        &self,
        bucket: &str,
        key: &str,
        offset: u64,
    ) -> Result<Box<dyn Read + Send>> {
        let mut reader = S3Reader {
            shared: self.shared.clone(),
            location: Location::S3 {
                bucket: bucket.into(),
                key: key.into(),
            },
            bucket: bucket.into(),
            key: key.into(),
            pos: offset,
            etag: None,
            body: None,
            chunk: Bytes::new(),
            done: false,
        };
        // Open eagerly so a missing object fails here, with its address.
        let url = reader.location.to_string();
        reader
            .connect()
            .map_err(|e| Error::from_io_error("opening", url, e))?;
        Ok(Box::new(reader))
    }

    pub(super) fn read_range(
        &self,
        bucket: &str,
        key: &str,
        offset: u64,
        len: u64,
    ) -> Result<Bytes> {
        let loc = Location::S3 {
            bucket: bucket.into(),
            key: key.into(),
        };
        let shared = &self.shared;
        let range = format!("bytes={}-{}", offset, offset + len - 1);
        shared.block_on_retry("reading a range of", &loc, || {
            let req = shared
                .client
                .get_object()
                .bucket(bucket)
                .key(key)
                .range(&range);
            async move {
                let out = req.send().await.map_err(|e| {
                    if is_not_found(&e) {
                        Failure::permanent("no such object")
                    } else {
                        classify(e)
                    }
                })?;
                let data = out.body.collect().await.map_err(|e| Failure {
                    transient: true,
                    message: format!("body: {e}"),
                })?;
                Ok(data.into_bytes())
            }
        })
    }

    pub(super) fn delete(&self, bucket: &str, key: &str) -> Result<()> {
        let loc = Location::S3 {
            bucket: bucket.into(),
            key: key.into(),
        };
        let shared = &self.shared;
        shared.block_on_retry("deleting", &loc, || {
            let req = shared.client.delete_object().bucket(bucket).key(key);
            async move { req.send().await.map(|_| ()).map_err(classify) }
        })
    }

    pub(super) fn create_bucket(&self, bucket: &str) -> Result<()> {
        let loc = Location::S3 {
            bucket: bucket.into(),
            key: String::new(),
        };
        let shared = &self.shared;
        shared.block_on_retry("creating bucket", &loc, || {
            let req = shared.client.create_bucket().bucket(bucket);
            async move {
                match req.send().await {
                    Ok(_) => Ok(()),
                    Err(e)
                        if matches!(
                            e.code(),
                            Some("BucketAlreadyOwnedByYou" | "BucketAlreadyExists")
                        ) =>
                    {
                        Ok(())
                    }
                    Err(e) => Err(classify(e)),
                }
            }
        })
    }

    pub(super) fn create(&self, bucket: &str, key: &str) -> S3Writer {
        S3Writer {
            shared: self.shared.clone(),
            location: Location::S3 {
                bucket: bucket.into(),
                key: key.into(),
            },
            bucket: bucket.into(),
            key: key.into(),
            buf: BytesMut::new(),
            upload: None,
            finished: false,
        }
    }
}

impl Shared {
    fn backoff(&self, attempt: u32) -> Duration {
        let cap = self
            .options
            .base_backoff
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.options.max_backoff);
        // Full jitter: a uniform wait in [0, cap].
        cap.mul_f64(fastrand::f64())
    }

    async fn retry<T, F, Fut>(&self, op: &'static str, loc: &Location, mut attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, Failure>>,
    {
        let mut n = 0;
        loop {
            match attempt().await {
                Ok(v) => return Ok(v),
                Err(mut f) if f.transient && n + 1 < self.options.max_attempts => {
                    f.message = crate::error::redact_secrets(&f.message);
                    let wait = self.backoff(n);
                    tracing::debug!(op, url = %loc, attempt = n + 1, error = %f.message, ?wait, "retrying transient S3 fault");
                    tokio::time::sleep(wait).await;
                    n += 1;
                }
                Err(mut f) => {
                    // What the server or the SDK said may echo a signature or a token.
                    f.message = crate::error::redact_secrets(&f.message);
                    let message = if f.transient {
                        format!("{} (gave up after {} attempts)", f.message, n + 1)
                    } else {
                        f.message
                    };
                    return Err(Error::S3 {
                        op,
                        url: loc.to_string(),
                        message,
                    });
                }
            }
        }
    }

    fn block_on_retry<T, F, Fut>(&self, op: &'static str, loc: &Location, attempt: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = std::result::Result<T, Failure>>,
    {
        self.rt.block_on(self.retry(op, loc, attempt))
    }
}

/// Streams an object; a broken body is resumed with a ranged GET from the current
/// offset, pinned to the first response's ETag so a replaced object is never spliced.
struct S3Reader {
    shared: Arc<Shared>,
    location: Location,
    bucket: String,
    key: String,
    pos: u64,
    etag: Option<String>,
    body: Option<ByteStream>,
    chunk: Bytes,
    done: bool,
}

impl S3Reader {
    fn connect(&mut self) -> io::Result<()> {
        let shared = self.shared.clone();
        let (bucket, key, pos, etag) = (&self.bucket, &self.key, self.pos, self.etag.clone());
        let out = shared
            .block_on_retry("reading", &self.location, || {
                let mut req = shared.client.get_object().bucket(bucket).key(key);
                if pos > 0 {
                    req = req.range(format!("bytes={pos}-"));
                }
                if let Some(tag) = &etag {
                    req = req.if_match(tag);
                }
                async move {
                    match req.send().await {
                        Ok(out) => Ok(Some(out)),
                        Err(e) if e.code() == Some("InvalidRange") => Ok(None),
                        Err(e) if is_not_found(&e) => Err(Failure::permanent("no such object")),
                        Err(e) => Err(classify(e)),
                    }
                }
            })
            .map_err(Error::into_io)?;
        match out {
            Some(out) => {
                if self.etag.is_none() {
                    self.etag = out.e_tag().map(str::to_string);
                }
                self.body = Some(out.body);
            }
            None => self.done = true,
        }
        Ok(())
    }
}

impl Read for S3Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut failures = 0;
        loop {
            if !self.chunk.is_empty() {
                let n = self.chunk.len().min(buf.len());
                buf[..n].copy_from_slice(&self.chunk.split_to(n));
                self.pos += n as u64;
                return Ok(n);
            }
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            if self.body.is_none() {
                self.connect()?;
                continue;
            }
            let shared = self.shared.clone();
            let next = match self.body.as_mut() {
                Some(body) => shared.rt.block_on(body.next()),
                None => continue,
            };
            match next {
                Some(Ok(bytes)) => self.chunk = bytes,
                None => self.done = true,
                Some(Err(e)) => {
                    failures += 1;
                    self.body = None;
                    if failures >= self.shared.options.max_attempts {
                        return Err(Error::S3 {
                            op: "reading",
                            url: self.location.to_string(),
                            message: format!(
                                "body broke {failures} times at byte {}: {e}",
                                self.pos
                            ),
                        }
                        .into_io());
                    }
                    tracing::debug!(url = %self.location, pos = self.pos, error = %e, "resuming broken S3 body");
                    std::thread::sleep(self.shared.backoff(failures));
                }
            }
        }
    }
}

struct Upload {
    id: String,
    next_part: i32,
    in_flight: Vec<JoinHandle<Result<CompletedPart>>>,
    done: Vec<CompletedPart>,
    permits: Arc<Semaphore>,
}

/// Buffers a part, uploads full parts concurrently (bounded), completes on finish,
/// aborts when dropped unfinished. An object smaller than one part is a single PUT.
pub(super) struct S3Writer {
    shared: Arc<Shared>,
    location: Location,
    bucket: String,
    key: String,
    buf: BytesMut,
    upload: Option<Upload>,
    finished: bool,
}

impl S3Writer {
    fn start_upload(&mut self) -> Result<()> {
        if self.upload.is_some() {
            return Ok(());
        }
        let shared = &self.shared;
        let (bucket, key) = (&self.bucket, &self.key);
        let out = shared.block_on_retry("starting multipart upload of", &self.location, || {
            let req = shared
                .client
                .create_multipart_upload()
                .bucket(bucket)
                .key(key);
            async move { req.send().await.map_err(classify) }
        })?;
        let id = out.upload_id().ok_or_else(|| Error::S3 {
            op: "starting multipart upload of",
            url: self.location.to_string(),
            message: "the server returned no upload id".into(),
        })?;
        self.upload = Some(Upload {
            id: id.to_string(),
            next_part: 1,
            in_flight: Vec::new(),
            done: Vec::new(),
            permits: Arc::new(Semaphore::new(shared.options.part_concurrency.max(1))),
        });
        Ok(())
    }

    /// Sends one part in the background; blocks while `part_concurrency` parts are in
    /// flight, which bounds memory.
    fn send_part(&mut self, data: Bytes) -> Result<()> {
        self.start_upload()?;
        let shared = self.shared.clone();
        let location = self.location.clone();
        let (bucket, key) = (self.bucket.clone(), self.key.clone());
        let Some(upload) = self.upload.as_mut() else {
            return Err(Error::Usage("multipart upload vanished".into()));
        };
        let permit = shared
            .rt
            .block_on(upload.permits.clone().acquire_owned())
            .map_err(|e| Error::Usage(format!("upload permits closed: {e}")))?;
        let number = upload.next_part;
        upload.next_part += 1;
        let id = upload.id.clone();
        let task_shared = shared.clone();
        let handle = shared.rt.spawn(async move {
            let _permit = permit;
            let s = &task_shared;
            let out = s
                .retry("uploading a part of", &location, || {
                    let req = s
                        .client
                        .upload_part()
                        .bucket(&bucket)
                        .key(&key)
                        .upload_id(&id)
                        .part_number(number)
                        .body(ByteStream::from(data.clone()));
                    async move { req.send().await.map_err(classify) }
                })
                .await?;
            Ok(CompletedPart::builder()
                .part_number(number)
                .set_e_tag(out.e_tag().map(str::to_string))
                .build())
        });
        upload.in_flight.push(handle);
        self.reap(false)
    }

    /// Collects finished part uploads (all of them when `wait`), surfacing failures.
    fn reap(&mut self, wait: bool) -> Result<()> {
        let Some(upload) = self.upload.as_mut() else {
            return Ok(());
        };
        let mut pending = Vec::new();
        for handle in upload.in_flight.drain(..) {
            if wait || handle.is_finished() {
                let part = self.shared.rt.block_on(handle).map_err(|e| Error::S3 {
                    op: "uploading a part of",
                    url: self.location.to_string(),
                    message: format!("upload task failed: {e}"),
                })??;
                upload.done.push(part);
            } else {
                pending.push(handle);
            }
        }
        upload.in_flight = pending;
        Ok(())
    }

    fn complete(&mut self) -> Result<()> {
        let rest = self.buf.split().freeze();
        if self.upload.is_none() {
            let shared = &self.shared;
            let (bucket, key) = (&self.bucket, &self.key);
            return shared.block_on_retry("writing", &self.location, || {
                let req = shared
                    .client
                    .put_object()
                    .bucket(bucket)
                    .key(key)
                    .body(ByteStream::from(rest.clone()));
                async move { req.send().await.map(|_| ()).map_err(classify) }
            });
        }
        if !rest.is_empty() {
            self.send_part(rest)?;
        }
        self.reap(true)?;
        let shared = &self.shared;
        let Some(upload) = self.upload.as_mut() else {
            return Err(Error::Usage("multipart upload vanished".into()));
        };
        upload.done.sort_by_key(|p| p.part_number());
        let parts = CompletedMultipartUpload::builder()
            .set_parts(Some(upload.done.clone()))
            .build();
        let (bucket, key, id) = (&self.bucket, &self.key, &upload.id);
        shared.block_on_retry("completing multipart upload of", &self.location, || {
            let req = shared
                .client
                .complete_multipart_upload()
                .bucket(bucket)
                .key(key)
                .upload_id(id)
                .multipart_upload(parts.clone());
            async move { req.send().await.map(|_| ()).map_err(classify) }
        })?;
        self.upload = None;
        Ok(())
    }

    fn abort(&mut self) {
        let Some(upload) = self.upload.take() else {
            return;
        };
        for handle in &upload.in_flight {
            handle.abort();
        }
        let shared = &self.shared;
        let (bucket, key, id) = (&self.bucket, &self.key, &upload.id);
        let res = shared.block_on_retry("aborting multipart upload of", &self.location, || {
            let req = shared
                .client
                .abort_multipart_upload()
                .bucket(bucket)
                .key(key)
                .upload_id(id);
            async move { req.send().await.map(|_| ()).map_err(classify) }
        });
        if let Err(e) = res {
            tracing::warn!(error = %e, "could not abort an unfinished upload; a lifecycle rule will reclaim it");
        }
    }
}

impl Write for S3Writer {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let part = self.shared.options.part_bytes.max(5 << 20);
        self.buf.extend_from_slice(data);
        while self.buf.len() >= part {
            let chunk = self.buf.split_to(part).freeze();
            self.send_part(chunk).map_err(Error::into_io)?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ObjectWriter for S3Writer {
    fn finish(mut self: Box<Self>) -> Result<()> {
        let result = self.complete();
        if result.is_ok() {
            self.finished = true;
        }
        result
    }
}

impl Drop for S3Writer {
    fn drop(&mut self) {
        if !self.finished {
            self.abort();
        }
    }
}
