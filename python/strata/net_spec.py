"""Writing nets in Python, with pycaffe's net_spec names: NetSpec, layers (L), params (P), to_proto.

    n = NetSpec()
    n.data, n.label = L.Data(source='train_lmdb', backend=P.Data.LMDB, batch_size=64, ntop=2)
    n.ip = L.InnerProduct(n.data, num_output=10, weight_filler=dict(type='xavier'))
    n.loss = L.SoftmaxWithLoss(n.ip, n.label)
    open('net.prototxt', 'w').write(str(n.to_proto()))

A layer's keyword arguments set fields of its type's parameter message (num_output= of convolution_param)
when that message has them, else fields of the layer itself (loss_weight=, include=); names ending in
"param" always set the layer's own field (transform_param=, param=). Dicts are messages, lists repeated fields.
The message is checked against strata.proto's schema as it is built: an unknown field is an AttributeError.
"""

import numbers
from collections import OrderedDict

from ._strata import _proto_schema, _proto_parse, _proto_serialize

_MESSAGES, _ENUMS = _proto_schema()


class Message:
    """A protobuf message of strata.proto, built field by field and printed in the text format (str())."""

    def __init__(self, type_name, **fields):
        object.__setattr__(self, '_type', type_name)
        object.__setattr__(self, '_fields', OrderedDict())
        for k, v in fields.items():
            assign_proto(self, k, v)

    def _field(self, name):
        fields = _MESSAGES[self._type]
        if name not in fields:
            raise AttributeError('%s has no field %s' % (self._type.split('.')[-1], name))
        return fields[name]

    def __getattr__(self, name):
        if name.startswith('_'):
            raise AttributeError(name)
        kind, type_name, repeated = self._field(name)
        if name not in self._fields:
            if repeated:
                self._fields[name] = []
            elif kind == 'message':
                self._fields[name] = Message(type_name)
            else:
                raise AttributeError('%s.%s is not set' % (self._type.split('.')[-1], name))
        return self._fields[name]

    def __setattr__(self, name, value):
        kind, type_name, repeated = self._field(name)
        if repeated:
            self._fields[name] = [_checked(kind, type_name, name, v) for v in value]
        else:
            self._fields[name] = _checked(kind, type_name, name, value)

    def add(self, name):
        """Appends a new message to the repeated message field `name` and returns it."""
        kind, type_name, repeated = self._field(name)
        if not (repeated and kind == 'message'):
            raise AttributeError('%s.%s is not a repeated message' % (self._type.split('.')[-1], name))
        msg = Message(type_name)
        getattr(self, name).append(msg)
        return msg

    def _lines(self, indent):
        pad = '  ' * indent
        out = []
        for name, (kind, type_name, _) in _MESSAGES[self._type].items():  # in strata.proto's order
            if name not in self._fields:
                continue
            value = self._fields[name]
            for v in (value if isinstance(value, list) else [value]):
                if kind == 'message':
                    out.append('%s%s {' % (pad, name))
                    out.extend(v._lines(indent + 1))
                    out.append('%s}' % pad)
                else:
                    out.append('%s%s: %s' % (pad, name, _text(kind, type_name, v)))
        return out

    def SerializeToString(self):
        """The message in protobuf's binary format (as a .binaryproto or a caffemodel holds it)."""
        return _proto_serialize(self._type, str(self))

    def ParseFromString(self, data):
        """Replaces the fields with those of the binary message `data`."""
        self._fields.clear()
        for k, v in _proto_parse(self._type, bytes(data)).items():
            assign_proto(self, k, v)

    def HasField(self, name):
        self._field(name)
        return name in self._fields and self._fields[name] != []

    def __str__(self):
        return ''.join(line + '\n' for line in self._lines(0))

    def __repr__(self):
        return '<%s>\n%s' % (self._type, self)


def _checked(kind, type_name, name, value):
    if kind == 'message':
        if isinstance(value, Message):
            return value
        if isinstance(value, dict):
            return Message(type_name, **value)
        raise TypeError('field %s takes a message (a dict), not %r' % (name, value))
    if kind == 'enum':
        values = _ENUMS[type_name]
        if isinstance(value, str):
            if value not in values:
                raise ValueError('field %s: %r is not one of %s' % (name, value, sorted(values)))
            return value
        for label, number in values.items():
            if number == value:
                return label
        raise ValueError('field %s: %r is not one of %s' % (name, value, sorted(values.values())))
    if kind == 'string':
        if not isinstance(value, (str, bytes)):
            raise TypeError('field %s takes a string, not %r' % (name, value))
        return value
    if kind == 'bool':
        return bool(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        raise TypeError('field %s takes a number, not %r' % (name, value))
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _text(kind, type_name, value):
    if kind == 'string':
        if isinstance(value, str):
            value = value.encode('utf-8')
        escaped = ''.join(chr(c) if 32 <= c < 127 and c not in (34, 92) else '\\%03o' % c for c in value)
        return '"%s"' % escaped
    if kind == 'bool':
        return 'true' if value else 'false'
    if kind == 'enum':
        return value
    return repr(value)


def assign_proto(proto, name, value):
    """Sets proto.name from a Python value: a dict is a message, a list a repeated field (of dicts: messages)."""
    kind, type_name, repeated = proto._field(name)
    if repeated:
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if kind == 'message':
                msg = proto.add(name)
                for k, item in (v.items() if isinstance(v, dict) else v._fields.items()):
                    assign_proto(msg, k, item)
            else:
                getattr(proto, name).append(_checked(kind, type_name, name, v))
    elif kind == 'message' and isinstance(value, dict):
        msg = getattr(proto, name)
        for k, v in value.items():
            assign_proto(msg, k, v)
    else:
        setattr(proto, name, value)


def param_name_dict():
    """Layer type -> the prefix of its parameter field: {'Convolution': 'convolution', 'Data': 'data', ...}."""
    names = {}
    for field, (kind, type_name, _) in _MESSAGES['strata.LayerParameter'].items():
        short = type_name.split('.')[-1]
        if kind == 'message' and field.endswith('_param') and short.endswith('Parameter'):
            names[short[:-len('Parameter')]] = field[:-len('_param')]
    return names


_param_names = param_name_dict()


class Top:
    """One output of a layer (Function), as the layer's tops are named in a NetSpec."""

    def __init__(self, fn, n):
        self.fn = fn
        self.n = n

    def to_proto(self):
        """The net of every layer this top depends on."""
        return to_proto(self)

    def _to_proto(self, layers, names, autonames):
        return self.fn._to_proto(layers, names, autonames)


class Function:
    """A layer: its type, its bottoms (Tops) and its parameters; ntop= says how many tops it has (default 1) and
    in_place=True makes its top its bottom."""

    def __init__(self, type_name, inputs, params):
        self.type_name = type_name
        for i, inp in enumerate(inputs):
            if not isinstance(inp, Top):
                raise TypeError('%s: bottom %d is %r, not the top of a layer' % (type_name, i, inp))
        self.inputs = inputs
        self.params = dict(params)
        self.ntop = self.params.pop('ntop', 1)
        self.in_place = self.params.pop('in_place', False)
        self.tops = tuple(Top(self, n) for n in range(self.ntop))

    def _get_name(self, names, autonames):
        if self not in names and self.ntop > 0:
            names[self] = self._get_top_name(self.tops[0], names, autonames)
        elif self not in names:
            autonames[self.type_name] += 1
            names[self] = self.type_name + str(autonames[self.type_name])
        return names[self]

    def _get_top_name(self, top, names, autonames):
        if top not in names:
            autonames[top.fn.type_name] += 1
            names[top] = top.fn.type_name + str(autonames[top.fn.type_name])
        return names[top]

    def _to_proto(self, layers, names, autonames):
        if self in layers:
            return
        bottom_names = []
        for inp in self.inputs:
            inp._to_proto(layers, names, autonames)
            bottom_names.append(layers[inp.fn].top[inp.n])
        layer = Message('strata.LayerParameter')
        layer.type = self.type_name
        layer.bottom = bottom_names
        if self.in_place:
            layer.top = bottom_names
        else:
            layer.top = [self._get_top_name(top, names, autonames) for top in self.tops]
        layer.name = self._get_name(names, autonames)
        for k, v in self.params.items():
            if k.endswith('param'):
                assign_proto(layer, k, v)
                continue
            try:
                assign_proto(getattr(layer, _param_names[self.type_name] + '_param'), k, v)
            except (AttributeError, KeyError):
                assign_proto(layer, k, v)
        layers[self] = layer


class NetSpec:
    """Tops by name: n.name = top names the top (and the layer whose first top it is) in to_proto()."""

    def __init__(self):
        super().__setattr__('tops', OrderedDict())

    def __setattr__(self, name, value):
        self.tops[name] = value

    def __getattr__(self, name):
        try:
            return self.tops[name]
        except KeyError:
            raise AttributeError(name)

    def __setitem__(self, key, value):
        self.__setattr__(key, value)

    def __getitem__(self, item):
        return self.__getattr__(item)

    def __delitem__(self, name):
        del self.tops[name]

    def keys(self):
        return list(self.tops.keys())

    def vals(self):
        return list(self.tops.values())

    def to_proto(self):
        names = {v: k for k, v in self.tops.items()}
        autonames = _Counter()
        layers = OrderedDict()
        for top in self.tops.values():
            top._to_proto(layers, names, autonames)
        net = Message('strata.NetParameter')
        net.layer = list(layers.values())
        return net


class _Counter(dict):
    def __missing__(self, key):
        return 0


class Layers:
    """L.Type(*bottoms, **params): a layer of that type; its top, its tops (ntop > 1), or itself (ntop=0)."""

    def __getattr__(self, name):
        def layer_fn(*args, **kwargs):
            fn = Function(name, args, kwargs)
            if fn.ntop == 0:
                return fn
            if fn.ntop == 1:
                return fn.tops[0]
            return fn.tops
        return layer_fn


class _EnumValues:
    def __init__(self, message):
        self._message = message

    def __getattr__(self, name):
        prefix = self._message + '.'
        for enum, values in _ENUMS.items():
            if enum.startswith(prefix) and '.' not in enum[len(prefix):] and name in values:
                return values[name]
        raise AttributeError('%s has no enum value %s' % (self._message.split('.')[-1], name))


class Parameters:
    """P.Type.VALUE: the number of an enum value of TypeParameter (P.Pooling.MAX, P.Data.LMDB)."""

    def __getattr__(self, name):
        message = 'strata.%sParameter' % name
        if message not in _MESSAGES:
            raise AttributeError('strata.proto has no message %sParameter' % name)
        return _EnumValues(message)


def to_proto(*tops):
    """The net of every layer the given tops depend on, layers and tops named automatically (Type1, Type2...)."""
    layers = OrderedDict()
    names = {}
    autonames = _Counter()
    for top in tops:
        top.fn._to_proto(layers, names, autonames)
    net = Message('strata.NetParameter')
    net.layer = list(layers.values())
    return net


layers = Layers()
params = Parameters()
