"""S3 conformance checks with real clients (boto3, the aws cli, curl) against
Strata's gateway. TestS3Clients (cmd/strata/s3_test.go) runs it with:

  S3_ENDPOINT, S3_KEY, S3_SECRET       an access key of a user
  S3_OTHER_KEY, S3_OTHER_SECRET        an access key of another user
  STRATA, STRATA_SERVER                the strata binary and server (for
                                       migrate/purge in the Glacier cycle)

Each check prints "ok NAME"; the first failure raises and exits non-zero.
"""
import base64, datetime, hashlib, io, json, os, subprocess, sys, time, urllib.request, urllib.error, zlib
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

EP = os.environ["S3_ENDPOINT"]


def client(key=None, secret=None, **cfg):
    return boto3.client("s3", endpoint_url=EP, region_name="us-east-1",
                        aws_access_key_id=key or os.environ["S3_KEY"],
                        aws_secret_access_key=secret or os.environ["S3_SECRET"],
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **cfg))


s3 = client()
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def error_code(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    raise AssertionError("%s succeeded" % fn.__name__)


def md5(b):
    return hashlib.md5(b).hexdigest()


@check
def buckets():
    s3.create_bucket(Bucket="bkt-main")
    s3.create_bucket(Bucket="bkt-main")  # again, by its owner: 200 in us-east-1, as AWS
    other = client(os.environ["S3_OTHER_KEY"], os.environ["S3_OTHER_SECRET"])
    assert error_code(other.create_bucket, Bucket="bkt-main") == ("BucketAlreadyExists", 409)
    assert error_code(s3.create_bucket, Bucket="No_Such") [0] == "InvalidBucketName"
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "bkt-main" in names, names
    s3.head_bucket(Bucket="bkt-main")
    assert error_code(s3.head_bucket, Bucket="bkt-none")[1] == 404
    s3.create_bucket(Bucket="bkt-gone")
    s3.put_object(Bucket="bkt-gone", Key="x", Body=b"x")
    assert error_code(s3.delete_bucket, Bucket="bkt-gone") == ("BucketNotEmpty", 409)
    s3.delete_object(Bucket="bkt-gone", Key="x")
    s3.delete_bucket(Bucket="bkt-gone")
    assert error_code(s3.head_bucket, Bucket="bkt-gone")[1] == 404
    assert s3.get_bucket_location(Bucket="bkt-main").get("LocationConstraint") in (None, "")


@check
def objects():
    body = os.urandom(3 << 20)
    r = s3.put_object(Bucket="bkt-main", Key="a/b/c.bin", Body=body, ContentType="application/x-test",
                      Metadata={"run": "42", "who": "alice"})
    assert r["ETag"] == '"%s"' % md5(body), r["ETag"]
    h = s3.head_object(Bucket="bkt-main", Key="a/b/c.bin")
    assert h["ContentLength"] == len(body) and h["ETag"] == r["ETag"], h
    assert h["ContentType"] == "application/x-test" and h["Metadata"] == {"run": "42", "who": "alice"}, h
    g = s3.get_object(Bucket="bkt-main", Key="a/b/c.bin")
    assert g["Body"].read() == body
    # Overwrite replaces data and metadata together.
    s3.put_object(Bucket="bkt-main", Key="a/b/c.bin", Body=b"new")
    h = s3.head_object(Bucket="bkt-main", Key="a/b/c.bin")
    assert h["ContentLength"] == 3 and h["Metadata"] == {} and h["ETag"] == '"%s"' % md5(b"new"), h
    # Empty objects.
    s3.put_object(Bucket="bkt-main", Key="empty", Body=b"")
    assert s3.get_object(Bucket="bkt-main", Key="empty")["Body"].read() == b""
    assert error_code(s3.get_object, Bucket="bkt-main", Key="nope") == ("NoSuchKey", 404)
    assert error_code(s3.get_object, Bucket="bkt-none", Key="nope") == ("NoSuchBucket", 404)
    s3.delete_object(Bucket="bkt-main", Key="empty")
    s3.delete_object(Bucket="bkt-main", Key="empty")  # again: still 204
    assert error_code(s3.head_object, Bucket="bkt-main", Key="empty")[1] == 404


@check
def ranges_and_conditions():
    body = bytes(range(256)) * 4096
    etag = s3.put_object(Bucket="bkt-main", Key="r", Body=body)["ETag"]
    for rng, want in [("bytes=0-9", body[:10]), ("bytes=1000-", body[1000:]), ("bytes=-100", body[-100:]),
                      ("bytes=5-5", body[5:6]), ("bytes=1048000-99999999", body[1048000:])]:
        g = s3.get_object(Bucket="bkt-main", Key="r", Range=rng)
        assert g["Body"].read() == want, rng
        assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert error_code(s3.get_object, Bucket="bkt-main", Key="r", Range="bytes=%d-" % len(body)) == ("InvalidRange", 416)
    s3.get_object(Bucket="bkt-main", Key="r", IfMatch=etag)
    assert error_code(s3.get_object, Bucket="bkt-main", Key="r", IfMatch='"0000"') == ("PreconditionFailed", 412)
    assert error_code(s3.get_object, Bucket="bkt-main", Key="r", IfNoneMatch=etag)[1] == 304
    future = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    assert error_code(s3.get_object, Bucket="bkt-main", Key="r", IfModifiedSince=future)[1] == 304
    s3.get_object(Bucket="bkt-main", Key="r", IfModifiedSince=past)
    assert error_code(s3.get_object, Bucket="bkt-main", Key="r", IfUnmodifiedSince=past) == ("PreconditionFailed", 412)


@check
def conditional_writes():
    s3.put_object(Bucket="bkt-main", Key="cw", Body=b"one", IfNoneMatch="*")
    assert error_code(s3.put_object, Bucket="bkt-main", Key="cw", Body=b"two", IfNoneMatch="*") == ("PreconditionFailed", 412)
    etag = s3.head_object(Bucket="bkt-main", Key="cw")["ETag"]
    assert error_code(s3.put_object, Bucket="bkt-main", Key="cw", Body=b"two", IfMatch='"00"') == ("PreconditionFailed", 412)
    s3.put_object(Bucket="bkt-main", Key="cw", Body=b"two", IfMatch=etag)
    assert s3.get_object(Bucket="bkt-main", Key="cw")["Body"].read() == b"two"
    assert error_code(s3.put_object, Bucket="bkt-main", Key="cw-none", Body=b"x", IfMatch=etag) == ("NoSuchKey", 404)


@check
def checksums():
    body = os.urandom(200000)
    for alg in ["CRC32", "CRC32C", "CRC64NVME", "SHA256", "SHA1"]:
        r = s3.put_object(Bucket="bkt-main", Key="ck-" + alg, Body=body, ChecksumAlgorithm=alg)
        h = s3.head_object(Bucket="bkt-main", Key="ck-" + alg, ChecksumMode="ENABLED")
        assert h.get("Checksum" + alg) == r.get("Checksum" + alg) and h.get("Checksum" + alg), (alg, r, h)
    want = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    assert s3.head_object(Bucket="bkt-main", Key="ck-CRC32", ChecksumMode="ENABLED")["ChecksumCRC32"] == want
    # A wrong checksum is refused and nothing is stored.
    bad = base64.b64encode(b"\0\0\0\0").decode()
    assert error_code(s3.put_object, Bucket="bkt-main", Key="ck-bad", Body=body, ChecksumCRC32=bad)[0] == "BadDigest"
    assert error_code(s3.head_object, Bucket="bkt-main", Key="ck-bad")[1] == 404
    md = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    assert error_code(s3.put_object, Bucket="bkt-main", Key="ck-bad", Body=body, ContentMD5=md)[0] == "BadDigest"


@check
def listing():
    keys = ["l/a", "l/b/1", "l/b/2", "l/b-c", "l/c/d/e", "l/z"]
    for k in keys:
        s3.put_object(Bucket="bkt-main", Key=k, Body=k.encode())
    got = [o["Key"] for o in s3.list_objects_v2(Bucket="bkt-main", Prefix="l/")["Contents"]]
    assert got == sorted(keys), got  # bytewise order: "l/b-c" before "l/b/1"
    r = s3.list_objects_v2(Bucket="bkt-main", Prefix="l/", Delimiter="/")
    assert [o["Key"] for o in r["Contents"]] == ["l/a", "l/b-c", "l/z"], r
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["l/b/", "l/c/"], r
    r = s3.list_objects_v2(Bucket="bkt-main", Prefix="l/b")
    assert [o["Key"] for o in r["Contents"]] == ["l/b-c", "l/b/1", "l/b/2"], r
    # Pages of two, by continuation token, see every key once.
    seen, tok = [], None
    while True:
        kw = {"ContinuationToken": tok} if tok else {}
        r = s3.list_objects_v2(Bucket="bkt-main", Prefix="l/", MaxKeys=2, **kw)
        seen += [o["Key"] for o in r.get("Contents", [])]
        if not r["IsTruncated"]:
            break
        tok = r["NextContinuationToken"]
    assert seen == sorted(keys), seen
    r = s3.list_objects_v2(Bucket="bkt-main", Prefix="l/", StartAfter="l/b/2")
    assert [o["Key"] for o in r["Contents"]] == ["l/c/d/e", "l/z"], r
    # v1, with marker and delimiter.
    r = s3.list_objects(Bucket="bkt-main", Prefix="l/", Delimiter="/", MaxKeys=2)
    assert r["IsTruncated"] and r["NextMarker"], r
    r = s3.list_objects(Bucket="bkt-main", Prefix="l/", Delimiter="/", Marker=r["NextMarker"])
    assert [o["Key"] for o in r.get("Contents", [])] + [p["Prefix"] for p in r.get("CommonPrefixes", [])] == ["l/z", "l/b/", "l/c/"], r
    # DeleteObjects; the emptied prefixes go with their keys.
    r = s3.delete_objects(Bucket="bkt-main", Delete={"Objects": [{"Key": k} for k in keys] + [{"Key": "l/none"}]})
    assert len(r["Deleted"]) == len(keys) + 1 and not r.get("Errors"), r
    assert s3.list_objects_v2(Bucket="bkt-main", Prefix="l/")["KeyCount"] == 0


@check
def copy():
    body = os.urandom(5 << 20)
    s3.put_object(Bucket="bkt-main", Key="src", Body=body, Metadata={"k": "v"})
    r = s3.copy_object(Bucket="bkt-main", Key="dst/copy", CopySource={"Bucket": "bkt-main", "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == '"%s"' % md5(body)
    h = s3.head_object(Bucket="bkt-main", Key="dst/copy")
    assert h["Metadata"] == {"k": "v"} and h["ContentLength"] == len(body)
    s3.copy_object(Bucket="bkt-main", Key="src", CopySource={"Bucket": "bkt-main", "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"k": "new"})
    assert s3.head_object(Bucket="bkt-main", Key="src")["Metadata"] == {"k": "new"}
    assert s3.get_object(Bucket="bkt-main", Key="src")["Body"].read() == body
    assert error_code(s3.copy_object, Bucket="bkt-main", Key="src", CopySource={"Bucket": "bkt-main", "Key": "src"})[0] == "InvalidRequest"
    assert error_code(s3.copy_object, Bucket="bkt-main", Key="x", CopySource={"Bucket": "bkt-main", "Key": "nope"}) == ("NoSuchKey", 404)


@check
def multipart():
    part = 5 << 20
    data = os.urandom(8 * part + 12345)
    up = s3.create_multipart_upload(Bucket="bkt-main", Key="mp/big", Metadata={"m": "1"})["UploadId"]
    chunks = [data[i:i + part] for i in range(0, len(data), part)]

    def put(i):
        return s3.upload_part(Bucket="bkt-main", Key="mp/big", UploadId=up, PartNumber=i + 1, Body=chunks[i])["ETag"]
    with ThreadPoolExecutor(8) as ex:
        etags = list(ex.map(put, range(len(chunks))))
    listed = s3.list_parts(Bucket="bkt-main", Key="mp/big", UploadId=up)["Parts"]
    assert [p["ETag"] for p in listed] == etags and [p["Size"] for p in listed] == [len(c) for c in chunks], (listed, etags)
    ups = s3.list_multipart_uploads(Bucket="bkt-main")["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [("mp/big", up)], ups
    parts = [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]
    code = error_code(s3.complete_multipart_upload, Bucket="bkt-main", Key="mp/big", UploadId=up, MultipartUpload={"Parts": parts[::-1]})
    assert code[0] == "InvalidPartOrder", code
    assert error_code(s3.complete_multipart_upload, Bucket="bkt-main", Key="mp/big", UploadId=up,
                      MultipartUpload={"Parts": parts[:2] + [{"PartNumber": 99, "ETag": etags[0]}]})[0] == "InvalidPart"
    assert error_code(s3.head_object, Bucket="bkt-main", Key="mp/big")[1] == 404  # nothing half-visible
    # Two Completes at once (a client that timed out and sent it again):
    # one copies, the other waits and gives the same answer.
    with ThreadPoolExecutor(2) as ex:
        r, r1 = ex.map(lambda _: s3.complete_multipart_upload(Bucket="bkt-main", Key="mp/big", UploadId=up, MultipartUpload={"Parts": parts}), range(2))
    assert r["ETag"] == r1["ETag"], (r, r1)
    want = hashlib.md5(b"".join(bytes.fromhex(e.strip('"')) for e in etags)).hexdigest() + "-%d" % len(etags)
    assert r["ETag"] == '"%s"' % want, (r["ETag"], want)
    assert s3.get_object(Bucket="bkt-main", Key="mp/big")["Body"].read() == data
    assert s3.head_object(Bucket="bkt-main", Key="mp/big")["Metadata"] == {"m": "1"}
    assert not s3.list_multipart_uploads(Bucket="bkt-main").get("Uploads")
    # A Complete sent again gets the same answer; parts can be read back.
    r2 = s3.complete_multipart_upload(Bucket="bkt-main", Key="mp/big", UploadId=up, MultipartUpload={"Parts": parts})
    assert r2["ETag"] == r["ETag"]
    g = s3.get_object(Bucket="bkt-main", Key="mp/big", PartNumber=9)
    assert g["PartsCount"] == 9 and g["Body"].read() == chunks[8] and g["ETag"] == r["ETag"]
    assert s3.head_object(Bucket="bkt-main", Key="mp/big", PartNumber=2)["ContentLength"] == part
    assert error_code(s3.get_object, Bucket="bkt-main", Key="mp/big", PartNumber=10) == ("InvalidPart", 400)
    # Parts too small, part numbers out of range, abort.
    up = s3.create_multipart_upload(Bucket="bkt-main", Key="mp/small")["UploadId"]
    e1 = s3.upload_part(Bucket="bkt-main", Key="mp/small", UploadId=up, PartNumber=1, Body=b"a")["ETag"]
    e2 = s3.upload_part(Bucket="bkt-main", Key="mp/small", UploadId=up, PartNumber=2, Body=b"b")["ETag"]
    assert error_code(s3.complete_multipart_upload, Bucket="bkt-main", Key="mp/small", UploadId=up,
                      MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})[0] == "EntityTooSmall"
    assert error_code(s3.upload_part, Bucket="bkt-main", Key="mp/small", UploadId=up, PartNumber=10001, Body=b"c")[0] == "InvalidArgument"
    # UploadPartCopy from a range of another object.
    r = s3.upload_part_copy(Bucket="bkt-main", Key="mp/small", UploadId=up, PartNumber=3,
                            CopySource={"Bucket": "bkt-main", "Key": "mp/big"}, CopySourceRange="bytes=0-99")
    assert r["CopyPartResult"]["ETag"] == '"%s"' % md5(data[:100])
    s3.abort_multipart_upload(Bucket="bkt-main", Key="mp/small", UploadId=up)
    assert error_code(s3.list_parts, Bucket="bkt-main", Key="mp/small", UploadId=up) == ("NoSuchUpload", 404)


@check
def multipart_checksums():
    part = 5 << 20
    data = os.urandom(2 * part + 1000)
    chunks = [data[:part], data[part:2 * part], data[2 * part:]]
    for alg, typ in [("CRC32", "COMPOSITE"), ("SHA256", "COMPOSITE"), ("CRC64NVME", "FULL_OBJECT"), ("CRC32C", "FULL_OBJECT")]:
        key = "mpck/" + alg
        up = s3.create_multipart_upload(Bucket="bkt-main", Key=key, ChecksumAlgorithm=alg, ChecksumType=typ)
        assert up["ChecksumAlgorithm"] == alg and up.get("ChecksumType") == typ, up
        parts = []
        for i, c in enumerate(chunks):
            r = s3.upload_part(Bucket="bkt-main", Key=key, UploadId=up["UploadId"], PartNumber=i + 1, Body=c, ChecksumAlgorithm=alg)
            parts.append({"PartNumber": i + 1, "ETag": r["ETag"], "Checksum" + alg: r["Checksum" + alg]})
        r = s3.complete_multipart_upload(Bucket="bkt-main", Key=key, UploadId=up["UploadId"], MultipartUpload={"Parts": parts})
        assert r["ChecksumType"] == typ, r
        h = s3.head_object(Bucket="bkt-main", Key=key, ChecksumMode="ENABLED")
        assert h["Checksum" + alg] == r["Checksum" + alg] and h["ChecksumType"] == typ, (h, r)
        a = s3.get_object_attributes(Bucket="bkt-main", Key=key, ObjectAttributes=["ETag", "Checksum", "ObjectParts", "ObjectSize"])
        assert a["ObjectSize"] == len(data) and a["ObjectParts"]["TotalPartsCount"] == 3 and a["Checksum"]["Checksum" + alg] == r["Checksum" + alg], a
        if typ == "COMPOSITE":
            assert r["Checksum" + alg].endswith("-3"), r
        else:  # the whole object's: as a single PUT of the same bytes has it
            single = s3.put_object(Bucket="bkt-main", Key=key + "-single", Body=data, ChecksumAlgorithm=alg)
            assert single["Checksum" + alg] == r["Checksum" + alg], (single, r)
        # Joined, not copied, whatever the checksum: a FULL_OBJECT one is
        # combined from the parts' CRCs. Its BLAKE3 fixity is made from the
        # 5 MiB parts' tree nodes (blocks of 4 and 1 MiB), and a get
        # recomputing it agrees.
        st = subprocess.run([os.environ["STRATA"], "stat", "/s3/bkt-main/" + key], check=True, capture_output=True).stdout.decode()
        assert "3 stripe(s), stripe unit 5.0 MiB" in st and "Fixity: blake3:" in st, st
        back = subprocess.run([os.environ["STRATA"], "get", "--verify", "/s3/bkt-main/" + key, "-"], check=True, capture_output=True).stdout
        assert back == data, "the joined object read back with --verify differs"
    # A FULL_OBJECT upload whose parts come without checksums (a client
    # that sends them only when required): the gateway computes each
    # part's, so the parts are still joined and the object's checksum is
    # the whole object's.
    bare = client(request_checksum_calculation="when_required")
    key = "mpck/bare"
    up = bare.create_multipart_upload(Bucket="bkt-main", Key=key, ChecksumAlgorithm="CRC32C", ChecksumType="FULL_OBJECT")
    parts = [{"PartNumber": i + 1, "ETag": bare.upload_part(Bucket="bkt-main", Key=key, UploadId=up["UploadId"], PartNumber=i + 1, Body=c)["ETag"]}
             for i, c in enumerate(chunks)]
    r = bare.complete_multipart_upload(Bucket="bkt-main", Key=key, UploadId=up["UploadId"], MultipartUpload={"Parts": parts})
    single = s3.put_object(Bucket="bkt-main", Key=key + "-single", Body=data, ChecksumAlgorithm="CRC32C")
    assert r["ChecksumCRC32C"] == single["ChecksumCRC32C"] and r["ChecksumType"] == "FULL_OBJECT", (r, single)
    st = subprocess.run([os.environ["STRATA"], "stat", "/s3/bkt-main/" + key], check=True, capture_output=True).stdout.decode()
    assert "3 stripe(s), stripe unit 5.0 MiB" in st, st  # the parts themselves (a copy has the class's 4 MiB unit)
    assert s3.get_object(Bucket="bkt-main", Key=key)["Body"].read() == data


@check
def presigned():
    s3.put_object(Bucket="bkt-main", Key="pre", Body=b"presigned body")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "bkt-main", "Key": "pre"}, ExpiresIn=60)
    out = subprocess.run(["curl", "-sf", url], capture_output=True, check=True).stdout
    assert out == b"presigned body", out
    put = s3.generate_presigned_url("put_object", Params={"Bucket": "bkt-main", "Key": "pre-put"}, ExpiresIn=60)
    subprocess.run(["curl", "-sf", "-X", "PUT", "--data-binary", "via curl", put], check=True)
    assert s3.get_object(Bucket="bkt-main", Key="pre-put")["Body"].read() == b"via curl"
    expired = s3.generate_presigned_url("get_object", Params={"Bucket": "bkt-main", "Key": "pre"}, ExpiresIn=1)
    time.sleep(2)
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", expired], capture_output=True).stdout.decode()
    assert out.endswith("403") and "<Code>AccessDenied</Code>" in out, out
    tampered = url.replace("Key=", "Key=").replace("pre?", "pre-put?")
    out = subprocess.run(["curl", "-s", tampered], capture_output=True).stdout.decode()
    assert "<Code>SignatureDoesNotMatch</Code>" in out, out


@check
def auth_errors():
    assert error_code(client(secret="wrong-secret-xxxxxxxxxxxxxxxxxxxxxxxxxxxxx").list_buckets)[0] == "SignatureDoesNotMatch"
    assert error_code(client(key="SKNOSUCHKEY000000000").list_buckets)[0] == "InvalidAccessKeyId"
    req = urllib.request.Request(EP + "/bkt-main/pre")
    try:
        urllib.request.urlopen(req)
        raise AssertionError("anonymous GET succeeded")
    except urllib.error.HTTPError as e:
        assert e.code == 403 and b"<Code>AccessDenied</Code>" in e.read()
    # Another user may not read or write this user's bucket.
    other = client(os.environ["S3_OTHER_KEY"], os.environ["S3_OTHER_SECRET"])
    assert error_code(other.get_object, Bucket="bkt-main", Key="pre") == ("AccessDenied", 403)
    assert error_code(other.put_object, Bucket="bkt-main", Key="intruder", Body=b"x") == ("AccessDenied", 403)
    assert "bkt-main" not in [b["Name"] for b in other.list_buckets()["Buckets"]]


@check
def bad_input():
    assert error_code(s3.put_object, Bucket="bkt-main", Key="k" * 1025, Body=b"x")[0] == "KeyTooLongError"
    assert error_code(s3.put_object, Bucket="bkt-main", Key="a/../b", Body=b"x")[0] == "InvalidArgument"
    assert error_code(s3.put_object, Bucket="bkt-main", Key=".strata-multipart/x", Body=b"x")[0] == "InvalidArgument"
    assert error_code(s3.delete_objects, Bucket="bkt-main", Delete={"Objects": []})[0] == "MalformedXML"
    # Raw requests: malformed XML, a body shorter than its Content-Length.
    from botocore.awsrequest import AWSRequest
    from botocore.auth import S3SigV4Auth
    from botocore.credentials import Credentials
    creds = Credentials(os.environ["S3_KEY"], os.environ["S3_SECRET"])

    def raw(method, path, body, headers=None):
        req = AWSRequest(method=method, url=EP + path, data=body, headers=headers or {})
        req.headers["x-amz-content-sha256"] = "UNSIGNED-PAYLOAD"
        S3SigV4Auth(creds, "s3", "us-east-1").add_auth(req)
        r = urllib.request.Request(req.url, data=body, method=method, headers=dict(req.headers))
        try:
            with urllib.request.urlopen(r) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
    st, out = raw("POST", "/bkt-main?delete", b"<Delete><Object><Key>x</Key></Obj")
    assert st == 400 and b"MalformedXML" in out, (st, out)
    up = s3.create_multipart_upload(Bucket="bkt-main", Key="badxml")["UploadId"]
    st, out = raw("POST", "/bkt-main/badxml?uploadId=" + up, b"<CompleteMultipartUpload><Part>")
    assert st == 400 and b"MalformedXML" in out, (st, out)
    s3.abort_multipart_upload(Bucket="bkt-main", Key="badxml", UploadId=up)


@check
def aws_cli():
    """A 1 GiB file through the aws cli: a multipart upload of 64 MiB parts,
    8 at a time, and back with 8 ranged GETs at a time."""
    tmp = os.environ.get("TMPDIR", "/tmp")
    cfg = os.path.join(tmp, "aws-config")
    with open(cfg, "w") as f:
        f.write("[default]\ns3 =\n  max_concurrent_requests = 8\n  multipart_chunksize = 64MB\n  multipart_threshold = 64MB\n")
    env = dict(os.environ, AWS_ACCESS_KEY_ID=os.environ["S3_KEY"], AWS_SECRET_ACCESS_KEY=os.environ["S3_SECRET"], AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=cfg)
    src = os.path.join(tmp, "s3-cli-src")
    h = hashlib.sha256()
    with open(src, "wb") as f:
        for _ in range(64):
            b = os.urandom(16 << 20)
            h.update(b)
            f.write(b)
    aws = ["aws", "--endpoint-url", EP]
    subprocess.run(aws + ["s3", "cp", "--only-show-errors", src, "s3://bkt-main/cli/file"], env=env, check=True)
    os.remove(src)
    head = s3.head_object(Bucket="bkt-main", Key="cli/file")
    assert head["ContentLength"] == 1 << 30 and head["ETag"].endswith('-16"'), head
    subprocess.run(aws + ["s3", "cp", "--only-show-errors", "s3://bkt-main/cli/file", src + ".back"], env=env, check=True)
    back = hashlib.sha256()
    with open(src + ".back", "rb") as f:
        for b in iter(lambda: f.read(16 << 20), b""):
            back.update(b)
    assert back.digest() == h.digest(), "the 1 GiB object read back differs"
    os.remove(src + ".back")
    # Its parts (64 MiB: a power of two) were joined with the BLAKE3 of the
    # whole made from theirs, which a get recomputing it agrees with.
    strata = [os.environ["STRATA"]]
    st = subprocess.run(strata + ["stat", "/s3/bkt-main/cli/file"], check=True, capture_output=True).stdout.decode()
    assert "16 stripe(s), stripe unit 64.0 MiB" in st and "Fixity: blake3:" in st, st
    subprocess.run(strata + ["get", "--verify", "/s3/bkt-main/cli/file", src + ".verified"], check=True, capture_output=True)
    os.remove(src + ".verified")
    out = subprocess.run(aws + ["s3", "ls", "s3://bkt-main/cli/"], env=env, check=True, capture_output=True).stdout.decode()
    assert "file" in out and str(1 << 30) in out, out
    subprocess.run(aws + ["s3", "rm", "--only-show-errors", "s3://bkt-main/cli/file"], env=env, check=True)


@check
def glacier():
    strata = [os.environ["STRATA"]]
    body = os.urandom(1 << 20)
    s3.put_object(Bucket="bkt-main", Key="cold", Body=body, StorageClass="GLACIER")
    assert s3.head_object(Bucket="bkt-main", Key="cold")["StorageClass"] == "GLACIER"
    listed = s3.list_objects_v2(Bucket="bkt-main", Prefix="cold")["Contents"]
    assert listed[0]["StorageClass"] == "GLACIER", listed
    assert error_code(s3.restore_object, Bucket="bkt-main", Key="cold", RestoreRequest={"Days": 1})[0] == "InvalidObjectState"
    path = "/s3/bkt-main/cold"
    subprocess.run(strata + ["migrate", path], check=True, capture_output=True)
    subprocess.run(strata + ["purge", path], check=True, capture_output=True)
    assert error_code(s3.get_object, Bucket="bkt-main", Key="cold") == ("InvalidObjectState", 403)
    r = s3.restore_object(Bucket="bkt-main", Key="cold", RestoreRequest={"Days": 2})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 202, r
    code = None
    try:
        s3.restore_object(Bucket="bkt-main", Key="cold", RestoreRequest={"Days": 2})
    except ClientError as e:
        code = e.response["Error"]["Code"]
    h = s3.head_object(Bucket="bkt-main", Key="cold")
    assert code == "RestoreAlreadyInProgress" or 'ongoing-request="false"' in h.get("Restore", ""), (code, h)
    deadline = time.time() + 60
    while 'ongoing-request="false"' not in h.get("Restore", ""):
        assert h.get("Restore") == 'ongoing-request="true"', h
        assert time.time() < deadline, "restore did not finish"
        time.sleep(0.2)
        h = s3.head_object(Bucket="bkt-main", Key="cold")
    assert "expiry-date=" in h["Restore"], h
    assert s3.get_object(Bucket="bkt-main", Key="cold")["Body"].read() == body
    r = s3.restore_object(Bucket="bkt-main", Key="cold", RestoreRequest={"Days": 5})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200, r
    h2 = s3.head_object(Bucket="bkt-main", Key="cold")
    assert h2["Restore"] != h["Restore"], (h, h2)  # the expiry moved
    # A multipart object, its parts joined as its stripes (one a part, read
    # a few at a time, in pieces), goes to tape and comes back whole.
    part = 9 << 20
    mp = os.urandom(5 * part + 1000)
    up = s3.create_multipart_upload(Bucket="bkt-main", Key="cold-mp", StorageClass="GLACIER")["UploadId"]
    etags = [s3.upload_part(Bucket="bkt-main", Key="cold-mp", UploadId=up, PartNumber=i + 1, Body=mp[i * part:(i + 1) * part])["ETag"] for i in range(6)]
    s3.complete_multipart_upload(Bucket="bkt-main", Key="cold-mp", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
    st = subprocess.run(strata + ["stat", "/s3/bkt-main/cold-mp"], check=True, capture_output=True).stdout.decode()
    assert "6 stripe(s), stripe unit 9.0 MiB" in st, st
    for cmd in ("migrate", "purge"):
        subprocess.run(strata + [cmd, "/s3/bkt-main/cold-mp"], check=True, capture_output=True)
    s3.restore_object(Bucket="bkt-main", Key="cold-mp", RestoreRequest={"Days": 1})
    deadline = time.time() + 60
    while 'ongoing-request="false"' not in s3.head_object(Bucket="bkt-main", Key="cold-mp").get("Restore", ""):
        assert time.time() < deadline, "restore did not finish"
        time.sleep(0.2)
    assert s3.get_object(Bucket="bkt-main", Key="cold-mp")["Body"].read() == mp
    # A STANDARD object the HSM purged (its disk copy gone, as the disk's
    # watermarks do) is read as S3 reads STANDARD: the GET waits for the
    # recall, and the copy is back on disk.
    s3.put_object(Bucket="bkt-main", Key="warm", Body=body)
    for cmd in ("migrate", "purge"):
        subprocess.run(strata + [cmd, "/s3/bkt-main/warm"], check=True, capture_output=True)
    st = subprocess.run(strata + ["stat", "/s3/bkt-main/warm"], check=True, capture_output=True).stdout.decode()
    assert "tape" in st and "disk+tape" not in st, st
    assert "StorageClass" not in s3.head_object(Bucket="bkt-main", Key="warm")
    assert s3.get_object(Bucket="bkt-main", Key="warm")["Body"].read() == body
    st = subprocess.run(strata + ["stat", "/s3/bkt-main/warm"], check=True, capture_output=True).stdout.decode()
    assert "disk+tape" in st, st


def main():
    only = sys.argv[1:]
    for fn in CHECKS:
        if only and fn.__name__ not in only:
            continue
        fn()
        print("ok", fn.__name__, flush=True)


if __name__ == "__main__":
    main()
