#!/usr/bin/env bash
# Writes the seed corpora in fuzz/corpus/<target>/ (committed; rerun after changing a seed). Text seeds are
# copied from models/ or written here; binary ones (caffemodel, solverstate, Datum) are encoded from text
# with protoc --encode, so every seed can be read as the text below.
set -euo pipefail
cd "$(dirname "$0")/.."
c=fuzz/corpus
rm -rf "$c"
mkdir -p "$c"/{net_prototxt,solver_prototxt,caffemodel,solverstate,datum,crossover_table,tool_flags,image_list,hdf5_data,scale_inputs}
encode() { protoc --encode="strata.$1" -I proto proto/strata.proto; }

# Nets and solvers: the models, a Caffe V1 net, a Reversible block.
for f in models/*/*.prototxt; do
  case "$f" in *solver*) cp "$f" "$c/solver_prototxt/$(basename "$(dirname "$f")")_$(basename "$f")" ;;
               *) cp "$f" "$c/net_prototxt/$(basename "$(dirname "$f")")_$(basename "$f")" ;; esac
done
cat > "$c/net_prototxt/v1_layers.prototxt" <<'T'
name: "v1" input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
layers { name: "ip" type: INNER_PRODUCT bottom: "data" top: "ip" blobs_lr: 1 blobs_lr: 2
         inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layers { name: "relu" type: RELU bottom: "ip" top: "ip" }
layers { name: "prob" type: SOFTMAX bottom: "ip" top: "prob" }
T
cat > "$c/net_prototxt/reversible.prototxt" <<'T'
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 dim: 3 dim: 3 } } }
layer { name: "rev" type: "Reversible" bottom: "x" top: "y"
  reversible_param {
    f { layer { name: "c" type: "Convolution" bottom: "in" top: "out"
                convolution_param { num_output: 2 kernel_size: 1 } } }
    g { layer { name: "c" type: "Convolution" bottom: "in" top: "out"
                convolution_param { num_output: 2 kernel_size: 1 } } } } }
T
for policy in "fixed" "step' stepsize: 10 gamma: 0.1" "multistep' stepvalue: 5 stepvalue: 9 gamma: 0.5" \
              "exp' gamma: 0.99" "inv' gamma: 0.1 power: 0.75" "poly' power: 2 max_iter: 100" \
              "sigmoid' gamma: -0.1 stepsize: 20"; do
  name=$(echo "$policy" | cut -d"'" -f1)
  echo "base_lr: 0.01 lr_policy: '$policy momentum: 0.9 max_iter: 20 type: 'SGD'" > "$c/solver_prototxt/lr_$name.prototxt"
done
echo "base_lr: 0.001 type: 'Adam' momentum: 0.9 momentum2: 0.999 delta: 1e-8 max_iter: 5" > "$c/solver_prototxt/adam.prototxt"

# Weights for fuzz_util.hpp's SmallNet: conv 4x3x3x3 (+4), bn 3 statistics, fc 5x64 (+5).
blob() {  # blob NAME DIMS... : a BlobProto of that shape filled with small values
  local dims=("$@") n=1 s="" d
  for d in "${dims[@]}"; do n=$((n * d)); s+=" dim: $d"; done
  printf 'blobs { shape {%s }' "$s"
  for ((i = 0; i < n; ++i)); do printf ' data: %s' "0.$((i % 10))"; done
  printf ' }\n'
}
{
  echo 'name: "fuzz"'
  echo "layer { name: 'conv' type: 'Convolution' $(blob 4 3 3 3) $(blob 4) }"
  echo "layer { name: 'bn' type: 'BatchNorm' $(blob 4) $(blob 4) $(blob 1) }"
  echo "layer { name: 'fc' type: 'InnerProduct' $(blob 5 64) $(blob 5) }"
} | encode NetParameter > "$c/caffemodel/small_net"
echo "layers { name: 'fc' type: INNER_PRODUCT $(blob 5 64) $(blob 5) }" | encode NetParameter > "$c/caffemodel/v1_fc"
echo "layer { name: 'fc' $(blob 3 3) }" | encode NetParameter > "$c/caffemodel/wrong_shape"

# Solver states for SGD with momentum on SmallNet: one history blob per learnable parameter.
history() { blob "$@" | sed 's/^blobs/history/'; }
{
  echo "iter: 7 current_step: 1 num_ranks: 1 data_position: 3"
  history 4 3 3 3; history 4; history 5 64; history 5
} | encode SolverState > "$c/solverstate/sgd_momentum"
echo "iter: 3 rng_state: '5489 1 2 3'" | encode SolverState > "$c/solverstate/bad_rng"

# Datum records, each behind the transform knob byte (fuzz/datum.cpp): raw bytes, float_data, a PNG.
datum() {  # datum KNOB TEXT
  { printf "\\x$(printf %02x "$1")"; echo "$2" | encode Datum; } > "$c/datum/$3"
}
datum 0 "channels: 1 height: 4 width: 4 label: 3 data: '0123456789abcdef'" raw_gray
datum 137 "channels: 3 height: 2 width: 2 label: 1 data: 'rgbRGBrgbRGB'" raw_color_crop_train
datum 8 "channels: 1 height: 2 width: 2 float_data: 1 float_data: 2 float_data: 3 float_data: 4" floats
png=$(python3 - <<'P'
import struct, zlib
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))
raw = b''.join(b'\0' + bytes([x * 60, 255 - x * 60, 7]) * 3 for x in range(3))
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 3, 3, 8, 2, 0, 0, 0)) \
      + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b'')
print(''.join('\\x%02x' % b for b in png))  # a 3x3 RGB PNG, as a text-format string
P
)
datum 0 "encoded: true label: 2 data: \"$png\"" png

# Crossover tables and flag values.
sed -n 's/^\/\/     //p' include/strata/comm/hybrid_allreduce.hpp > "$c/crossover_table/header_example"
printf '2 inf shm\n4 inf shm\n8 inf shm\n* inf shm\n' > "$c/crossover_table/builtin"
printf '2 4096 brd\n2 65536 vhd\n2 inf ring_seg\n' > "$c/crossover_table/two_ranks"
for v in 4 64K 1.5M,256M,1G 4,16,64KiB 0.5 200000000 2e-1; do printf '%s' "$v" > "$c/tool_flags/$(echo "$v" | tr ',.' '_p')"; done

# The text targets' dictionary: every field name in the schema and every registered layer type, so the
# fuzzer writes `convolution_param {` and `"Pooling"` instead of guessing them a byte at a time.
{
  echo '# written by fuzz/make_seeds.sh: field names of proto/strata.proto and the layer types'
  grep -oE '^\s*(optional|repeated|required) \w+ \w+ = ' proto/strata.proto | awk '{print $3}' | sort -u |
    sed 's/.*/"&"/'
  grep -rhoE 'REGISTER_LAYER_CLASS\(\w+\)' src | sed 's/.*(\(.*\))/"\\"\1\\""/' | sort -u
  printf '"%s"\n' "{" "}" ":" "inf" "nan" "-1" "2147483648" "4294967295"
} > fuzz/prototxt.dict

# Image lists: Caffe's layout (path, a space, a label), tabs, blank lines, a path with spaces, bad labels.
printf 'cat/1.jpg 0\ndog/2.png 1\n\n  bird/3.jpeg\t2  \nmy photos/4.jpg 3\n' > "$c/image_list/caffe.txt"
printf 'a.jpg -1\nb.jpg 2147483648\nc.jpg x\nnolabel\n' > "$c/image_list/bad_labels.txt"

# HDF5Data: byte strings fuzz/hdf5_data.cpp decodes (its Bytes reads, in order), written by the encoder below.
# One file: a 3 x 2 float "data" (contiguous) and a chunked "label" of 3, tops data and label, batches of 2,
# 3 forwards, resumed 5 positions on. Two files: float and double "data" of 2 x 2 (one compact), float and int32
# "label" of 2, shuffled.
/usr/bin/python3 - "$c/hdf5_data" <<'P'
import struct, sys
def f32(*v): return b"".join(struct.pack(">f", x) for x in v)
# files, then per file: blank?, tab?, missing?, datasets; per dataset: name, kind, rank, dims, layout, [chunk],
# written?, values; then tops, their names, batch, shuffle, forwards, position step.
one = bytes([0, 1, 0, 1, 2]) + bytes([0, 0, 2, 3, 2, 0, 1]) + f32(1, 2, .5, -1, 0, 10) \
    + bytes([1, 0, 1, 3, 1, 1, 1]) + f32(1, 0, 2) + bytes([1, 0, 1, 2, 0, 2, 5])
two = bytes([1, 1, 0, 1, 2]) + bytes([0, 0, 2, 2, 2, 0, 1]) + f32(1, 2, 3, 4) + bytes([1, 0, 1, 2, 0, 1]) + f32(0, 1) \
    + bytes([1, 1, 1, 2]) + bytes([0, 2, 2, 2, 2, 2, 1]) + f32(5, 6, 7, 8) + bytes([1, 3, 1, 2, 0, 1]) + f32(1, 0) \
    + bytes([1, 0, 1, 1, 1, 3, 1])
for name, data in [("one_file.bin", one), ("two_files.bin", two)]:
    open(f"{sys.argv[1]}/{name}", "wb").write(data)
P

# strata scale's inputs: the first byte picks the format (0 machine file, 1 times file, 2 --nodes).
{ printf '0'; cat benchmarks/scale/tsubame25_fdr.machine; } > "$c/scale_inputs/machine"
printf '0alpha_us 12\nbandwidth_GBps 0.12\nwakeup_us 3600\ncores 1\npcie_GBps 0\n' > "$c/scale_inputs/machine_bed"
printf '1# times\nbatch 8\ndata 0 0\nconv 2.5 4\nfc 1 2  # top\n' > "$c/scale_inputs/times"
printf '21,2,...,4096' > "$c/scale_inputs/nodes_doubling"
printf '22,5,...,14' > "$c/scale_inputs/nodes_steps"

echo "seeds: $(find "$c" -type f | wc -l) files, $(du -sh "$c" | cut -f1)"
