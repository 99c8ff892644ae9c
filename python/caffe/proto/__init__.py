"""caffe.proto for Caffe's scripts: caffe_pb2 is strata.proto.strata_pb2 (needs python3-protobuf)."""
