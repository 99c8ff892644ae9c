"""The base class of Python layers (type: "Python" with python_param { module layer param_str })."""


class Layer:
    """Subclass this and define setup, reshape, forward and backward, each taking lists of strata.Blob:
    setup(bottom, top) and reshape(bottom, top) shape the tops, forward(bottom, top) fills top[i].data,
    backward(top, propagate_down, bottom) fills bottom[i].diff where propagate_down[i] is true.

    Strata sets self.param_str (python_param's param_str) and self.phase (strata.TRAIN or strata.TEST)
    before setup. self.blobs are the layer's parameters: self.blobs.add_blob(*shape) in setup adds one,
    which the net then treats as a learnable parameter like any other layer's."""

    param_str = ''
    phase = 0

    @property
    def blobs(self):
        return self._cpp_layer.blobs

    @property
    def type(self):
        return 'Python'

    def setup(self, bottom, top):
        pass

    def reshape(self, bottom, top):
        pass

    def forward(self, bottom, top):
        raise NotImplementedError('%s defines no forward' % type(self).__name__)

    def backward(self, top, propagate_down, bottom):
        raise NotImplementedError('%s defines no backward' % type(self).__name__)
