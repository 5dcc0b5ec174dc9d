NAME contract
OBJSENSE
    MAX
ROWS
 N obj
 L r0
 L r1
 L r2
 L r3
 L r4
 E r5
 E r6
 E r7
 E r8
 E r9
 E r10
 L r11
 L r12
 L r13
 L r14
 L r15
 L r16
 L r17
 L r18
 L r19
 L r20
 L r21
 L r22
COLUMNS
    MARKER 'MARKER' 'INTORG'
    x0 obj 15.0
    x0 r1 1.0
    x0 r7 -1.0
    x0 r19 -8.0
    x1 obj 15.0
    x1 r1 1.0
    x1 r10 -1.0
    x1 r20 -8.0
    x2 obj 24.499999999999996
    x2 r4 2.0
    x2 r16 -16.0
    x2 r17 -16.0
    x3 obj 14.8
    x3 r10 -1.0
    x3 r20 -8.0
    x4 obj 4.866666666666665
    x4 r2 1.0
    x4 r6 -1.0
    x4 r19 -4.0
    x5 obj 7.299999999999999
    x5 r2 1.0
    x5 r9 -1.0
    x5 r20 -4.0
    x6 obj 2.5
    x6 r3 1.0
    x6 r5 -1.0
    x6 r16 -2.0
    x6 r18 -2.0
    x6 r21 -2.0
    x7 obj 2.5
    x7 r3 1.0
    x7 r8 -1.0
    x7 r22 -2.0
    x8 obj 0.00012600000000000003
    x8 r0 1.0
    x8 r10 -1.0
    x9 obj 6.300459375000001
    x9 r11 4.0
    x9 r16 -4.0
    x9 r18 -4.0
    x10 obj 12.600131250000002
    x10 r0 1.0
    x10 r12 8.0
    x10 r16 -8.0
    x10 r18 -8.0
    x11 obj 0.05092709297839506
    x11 r13 4.0
    x12 obj 15.00015625
    x12 r1 1.0
    x12 r20 -8.0
    x13 r4 -1.0
    x13 r11 8.0
    x14 r4 -1.0
    x14 r12 8.0
    x15 r4 -1.0
    x15 r13 8.0
    x16 r4 -1.0
    x16 r14 8.0
    x17 r5 1.0
    x17 r11 2.0
    x18 r6 1.0
    x18 r11 4.0
    x19 r7 1.0
    x19 r11 8.0
    x20 r5 1.0
    x20 r12 2.0
    x21 r6 1.0
    x21 r12 4.0
    x22 r7 1.0
    x22 r12 8.0
    x23 r5 1.0
    x23 r13 2.0
    x24 r6 1.0
    x24 r13 4.0
    x25 r7 1.0
    x25 r13 8.0
    x26 r5 1.0
    x26 r14 2.0
    x27 r6 1.0
    x27 r14 4.0
    x28 r7 1.0
    x28 r14 8.0
    x29 r8 1.0
    x29 r15 2.0
    x30 r9 1.0
    x30 r15 4.0
    x31 r10 1.0
    x31 r15 8.0
    x32 obj 391.95783132530124
    x32 r16 1.0
    x33 obj 15.0
    x33 r16 1.0
    x34 obj 391.566265060241
    x34 r17 1.0
    x35 obj 7.5
    x35 r17 1.0
    x36 obj 391.17469879518075
    x36 r18 1.0
    x37 obj 784.698795180723
    x37 r19 1.0
    x38 obj 784.698795180723
    x38 r20 1.0
    x39 obj 22.5
    x39 r20 1.0
    x40 obj 3.75
    x40 r21 1.0
    x41 obj 3.75
    x41 r22 1.0
    MARKER 'MARKER' 'INTEND'
RHS
    rhs r0 1.0
    rhs r1 1.0
    rhs r2 1.0
    rhs r3 1.0
    rhs r11 8.0
    rhs r12 8.0
    rhs r13 8.0
    rhs r14 8.0
    rhs r15 8.0
BOUNDS
 UP bnd x0 1.0
 UP bnd x1 1.0
 UP bnd x2 1.0
 UP bnd x3 1.0
 UP bnd x4 1.0
 UP bnd x5 1.0
 UP bnd x6 1.0
 UP bnd x7 1.0
 UP bnd x8 1.0
 FX bnd x9 1.0
 UP bnd x10 1.0
 UP bnd x11 1.0
 FX bnd x12 0.0
 UP bnd x13 1.0
 UP bnd x14 1.0
 UP bnd x15 1.0
 UP bnd x16 1.0
 UP bnd x17 4.0
 UP bnd x18 2.0
 UP bnd x19 1.0
 UP bnd x20 4.0
 UP bnd x21 2.0
 UP bnd x22 1.0
 UP bnd x23 4.0
 UP bnd x24 2.0
 UP bnd x25 1.0
 UP bnd x26 4.0
 UP bnd x27 2.0
 UP bnd x28 1.0
 UP bnd x29 4.0
 UP bnd x30 2.0
 UP bnd x31 1.0
 UP bnd x32 21.0
 UP bnd x33 2.0
 UP bnd x34 10.0
 UP bnd x35 3.0
 UP bnd x36 10.0
 UP bnd x37 9.0
 UP bnd x38 2.0
 UP bnd x39 5.0
 UP bnd x40 3.0
 UP bnd x41 1.0
ENDATA
