#!/usr/bin/python3
"""Tiny generated stand-ins for the data BVLC Caffe's examples/ and models/ nets read.

    caffe_example_data.py ROOT BINDIR

ROOT is a directory laid out as a Caffe checkout (the nets' `source:` and `mean_file:` paths are relative to it);
BINDIR holds Strata's tools (convert_imageset, convert_mnist_data, compute_image_mean). Every source is written at
exactly the path the nets name, the way Caffe's own scripts make it (create_mnist.sh, create_cifar10.sh,
create_imagenet.sh + make_imagenet_mean.sh, the Flickr-style and HDF5-classification notebooks, ...), but from a few
random records of the right shape instead of the downloaded data set. Images are written as PGM/PPM/PAM files
(which OpenCV reads) and turned into databases by Strata's own tools. The Data layer wraps around, so a source
needs fewer records than a batch.

Needs numpy and h5py (Debian: python3-numpy, python3-h5py).
"""
import os
import subprocess
import sys

import h5py
import numpy as np

RNG = np.random.default_rng(1701)
RECORDS = 6  # records per source: a few; every net's batch wraps around them

# ---- What each source holds. The shapes cannot be derived from the nets (a Data layer's shape is its records'),
# so they are read off each example and its Caffe script by hand:
#   kind     'mnist'  : IDX files -> convert_mnist_data (as examples/mnist/create_mnist.sh), 1 x 28 x 28, 10 labels
#            'images' : image files + list -> convert_imageset (--gray for 1 channel), optionally resized
#            'pairs'  : siamese pairs, 2 x 28 x 28 (two MNIST digits stacked as channels), label 1 = same digit
#            'list'   : image files + list only, for ImageData (it reads and resizes the images itself)
#            'hdf5'   : .h5 files + the list naming them, for HDF5Data (datasets named as the layer's tops)
#   mean     : where compute_image_mean writes the database's mean (the file the nets' mean_file names)
SOURCES = [
    # examples/mnist: lenet_train_test, mnist_autoencoder (create_mnist.sh).
    dict(path='examples/mnist/mnist_train_lmdb', kind='mnist'),
    dict(path='examples/mnist/mnist_test_lmdb', kind='mnist'),
    # examples/cifar10: every *_train_test net; 3 x 32 x 32, 10 classes, mean from the train set
    # (create_cifar10.sh).
    dict(path='examples/cifar10/cifar10_train_lmdb', kind='images', shape=(3, 32, 32), labels=10,
         mean='examples/cifar10/mean.binaryproto'),
    dict(path='examples/cifar10/cifar10_test_lmdb', kind='images', shape=(3, 32, 32), labels=10),
    # models/bvlc_{alexnet,reference_caffenet,googlenet}/train_val: ImageNet resized to 256 x 256 by
    # convert_imageset (create_imagenet.sh, RESIZE=true) from images of any size; the crops (227, 224) need 256,
    # and the 256 x 256 mean (make_imagenet_mean.sh) is shared with the Flickr-style and feature-extraction nets.
    dict(path='examples/imagenet/ilsvrc12_train_lmdb', kind='images', shape=(3, 48, 64), labels=1000,
         resize=256, mean='data/ilsvrc12/imagenet_mean.binaryproto'),
    dict(path='examples/imagenet/ilsvrc12_val_lmdb', kind='images', shape=(3, 48, 64), labels=1000, resize=256),
    # models/finetune_flickr_style/train_val: ImageData lists of colour images, 20 style labels (the layer
    # resizes to 256 x 256; assemble_data.py writes paths relative to Caffe's root under data/flickr_style/).
    dict(path='data/flickr_style/train.txt', kind='list', shape=(3, 40, 60), labels=20),
    dict(path='data/flickr_style/test.txt', kind='list', shape=(3, 40, 60), labels=20),
    # examples/feature_extraction/imagenet_val: the list the feature-extraction readme makes (label 0).
    dict(path='examples/_temp/file_list.txt', kind='list', shape=(3, 50, 50), labels=1),
    # examples/siamese/mnist_siamese_train_test: LevelDB (no backend given: Caffe's default) of 2 x 28 x 28 pairs
    # (create_mnist_siamese.sh), label 'sim'.
    dict(path='examples/siamese/mnist_siamese_train_leveldb', kind='pairs'),
    dict(path='examples/siamese/mnist_siamese_test_leveldb', kind='pairs'),
    # examples/hdf5_classification: 4 float features, a 0/1 float label (the notebook's make_classification);
    # the notebook's train.txt names train.h5 twice.
    dict(path='examples/hdf5_classification/data/train.txt', kind='hdf5', features=4, labels=2,
         tops=('data', 'label'), files=('train.h5', 'train.h5')),
    dict(path='examples/hdf5_classification/data/test.txt', kind='hdf5', features=4, labels=2,
         tops=('data', 'label'), files=('test.h5',)),
]


def run(*cmd):
    """Runs one of Strata's tools, quietly unless it fails."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit('failed: %s\n%s' % (' '.join(cmd), r.stdout))


def write_pnm(path, img):
    """Writes a C x H x W uint8 array as PGM (C=1), PPM (C=3, given as RGB) or PAM (any C)."""
    c, h, w = img.shape
    hwc = np.ascontiguousarray(img.transpose(1, 2, 0))
    with open(path, 'wb') as f:
        if path.endswith('.pam'):
            tupltype = {1: 'GRAYSCALE', 2: 'GRAYSCALE_ALPHA', 3: 'RGB', 4: 'RGB_ALPHA'}[c]
            f.write(b'P7\nWIDTH %d\nHEIGHT %d\nDEPTH %d\nMAXVAL 255\nTUPLTYPE %s\nENDHDR\n' % (w, h, c,
                                                                                         tupltype.encode()))
        else:
            f.write(b'%s\n%d %d\n255\n' % ({1: b'P5', 3: b'P6'}[c], w, h))
        f.write(hwc.tobytes())


def random_images(shape, n):
    return RNG.integers(0, 256, size=(n,) + tuple(shape), dtype=np.uint8)


def write_image_list(root, list_path, shape, labels, ext):
    """Writes RECORDS images beside LIST_PATH (in <list>_images/) and the list naming them relative to ROOT."""
    folder = os.path.splitext(list_path)[0] + '_images'
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    lines = []
    for i, img in enumerate(random_images(shape, RECORDS)):
        rel = '%s/%03d.%s' % (folder, i, ext)
        write_pnm(os.path.join(root, rel), img)
        lines.append('%s %d\n' % (rel, RNG.integers(0, labels)))
    os.makedirs(os.path.dirname(os.path.join(root, list_path)), exist_ok=True)
    with open(os.path.join(root, list_path), 'w') as f:
        f.writelines(lines)


def write_idx(path, array):
    """Writes an unsigned-byte IDX file (MNIST's format), big-endian dims."""
    with open(path, 'wb') as f:
        f.write(bytes([0, 0, 0x08, array.ndim]))
        f.write(np.array(array.shape, dtype='>u4').tobytes())
        f.write(array.astype(np.uint8).tobytes())


def make(root, bindir, src):
    path, kind = src['path'], src['kind']
    full = os.path.join(root, path)
    scratch = os.path.join(root, '_generated', path.replace('/', '_'))
    os.makedirs(scratch, exist_ok=True)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    tool = lambda name: os.path.join(bindir, name)
    if kind == 'mnist':
        images, labels = os.path.join(scratch, 'images-idx3-ubyte'), os.path.join(scratch, 'labels-idx1-ubyte')
        write_idx(images, random_images((28, 28), RECORDS))
        write_idx(labels, RNG.integers(0, 10, size=RECORDS))
        run(tool('convert_mnist_data'), '--backend=lmdb', images, labels, full)
    elif kind in ('images', 'pairs'):
        # The image files and their list live in the scratch folder; ROOTFOLDER is that folder.
        shape = src.get('shape', (2, 28, 28))
        ext = {1: 'pgm', 3: 'ppm'}.get(shape[0], 'pam')
        write_image_list(scratch, 'list.txt', shape, src.get('labels', 2), ext)
        flags = ['--backend=' + ('leveldb' if path.endswith('leveldb') else 'lmdb')]
        if shape[0] != 3:
            flags.append('--gray')
        if kind == 'pairs':
            # OpenCV reads no raw 2-channel image into 2 channels except a PAM kept as it is: the records hold
            # the PAM file's bytes (encoded Datums), which the Data layer decodes unchanged to 2 x 28 x 28.
            flags.append('--encoded')
        if 'resize' in src:
            flags += ['--resize_height=%d' % src['resize'], '--resize_width=%d' % src['resize']]
        run(tool('convert_imageset'), *flags, scratch + '/', os.path.join(scratch, 'list.txt'), full)
        if 'mean' in src:
            os.makedirs(os.path.dirname(os.path.join(root, src['mean'])), exist_ok=True)
            run(tool('compute_image_mean'), flags[0], full, os.path.join(root, src['mean']))
    elif kind == 'list':
        write_image_list(root, path, src['shape'], src['labels'], 'ppm')
    elif kind == 'hdf5':
        folder = os.path.dirname(path)
        for name in set(src['files']):
            with h5py.File(os.path.join(root, folder, name), 'w') as f:
                f[src['tops'][0]] = RNG.standard_normal((RECORDS, src['features'])).astype(np.float32)
                f[src['tops'][1]] = RNG.integers(0, src['labels'], size=RECORDS).astype(np.float32)
        with open(full, 'w') as f:  # paths relative to ROOT, where the nets run
            f.writelines(os.path.join(folder, name) + '\n' for name in src['files'])
    else:
        raise ValueError(kind)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, bindir = sys.argv[1], sys.argv[2]
    for src in SOURCES:
        if os.path.exists(os.path.join(root, src['path'])):
            continue  # made by an earlier run (the databases' tools refuse to overwrite)
        make(root, bindir, src)
        print('made', src['path'] + (' and ' + src['mean'] if 'mean' in src else ''))


if __name__ == '__main__':
    main()
